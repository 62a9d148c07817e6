"""What reading an export may cost, and the one way readers open a file.

Limits (config/exports.toml ``[limits]``) are counted while bytes are read or unpacked, never
taken from an archive's headers alone: one file or zip member, all members of one archive read
in one pass, a member's unpacked/compressed ratio, an archive's entries and one message's text.
A file is opened only when it is a regular file outside /proc, /sys and /dev (a link is judged
by what it resolves to): devices, FIFOs and sockets are refused, never read.
"""

from __future__ import annotations

import codecs
import os
import stat
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import IO

from narrative_mirror import settings
from narrative_mirror.exports.records import Conversation, ExportedMessage, ExportFormatError

CONFIG = "exports"
CHUNK = 1 << 20
_SYSTEM_FOLDERS = (Path("/proc"), Path("/sys"), Path("/dev"))
_SHM = Path("/dev/shm")  # ordinary files in memory: a data folder may live there
_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


class ExportRefused(ExportFormatError):
    """A file the readers will not open (a device, a link out of the data folder) or one over a limit."""

    def __init__(self, file: object, problem: str):
        super().__init__(file, None, problem)


@dataclass(frozen=True)
class ReadLimits:
    max_member_bytes: int
    max_total_bytes: int
    max_ratio: float
    max_members: int
    max_message_chars: int

    def token(self) -> str:
        return ",".join(str(v) for v in astuple(self))

    def over(self, name: str, value: object) -> str:
        return f"over the limit {name} = {getattr(self, name):,} ({CONFIG}.toml [limits]): {value}"


def read_limits() -> ReadLimits:
    """The limits of config/exports.toml (the NM_CONFIG_DIR override first)."""
    table = settings.load_config(CONFIG).get("limits", {})
    values = {}
    for name, kind in ReadLimits.__annotations__.items():
        value = table.get(name)
        allowed = int | float if kind == "float" else int
        if isinstance(value, bool) or not isinstance(value, allowed) or value <= 0:
            raise ValueError(
                f"{settings.config_path(CONFIG)}: [limits] {name} must be a positive "
                f"{'number' if kind == 'float' else 'whole number'}, found {value!r}"
            )
        values[name] = value
    return ReadLimits(**values)


class ReadBudget:
    """Bytes unpacked from one archive in one read, against ``max_total_bytes``."""

    def __init__(self, limits: ReadLimits, archive: object):
        self.limits, self.archive, self.total = limits, str(archive), 0

    def spend(self, count: int) -> None:
        self.total += count
        if self.total > self.limits.max_total_bytes:
            raise ExportRefused(
                self.archive,
                self.limits.over("max_total_bytes", f"unpacks to more than {self.limits.max_total_bytes:,} bytes"),
            )


class LimitedReader:
    """A binary handle that counts what it gives and refuses past a limit, before holding it."""

    def __init__(
        self,
        raw: IO[bytes],
        label: str,
        limits: ReadLimits,
        *,
        compressed: int | None = None,
        budget: ReadBudget | None = None,
    ):
        self.raw, self.label, self.limits, self.budget = raw, label, limits, budget
        self.compressed, self.count = compressed, 0

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            return b"".join(iter(lambda: self.read(CHUNK), b""))
        try:
            data = self.raw.read(min(size, self.limits.max_member_bytes - self.count + 1))
        except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
            raise ExportFormatError(self.label, None, f"a damaged archive member ({exc})") from None
        self._spend(len(data))
        return data

    def _spend(self, count: int) -> None:
        self.count += count
        if self.count > self.limits.max_member_bytes:
            raise ExportRefused(
                self.label, self.limits.over("max_member_bytes", f"more than {self.limits.max_member_bytes:,} bytes")
            )
        if self.compressed is not None and self.count > self.limits.max_ratio * max(self.compressed, 1):
            raise ExportRefused(
                self.label,
                self.limits.over(
                    "max_ratio",
                    f"unpacks to more than {self.limits.max_ratio:g} times its {self.compressed:,} compressed bytes",
                ),
            )
        if self.budget is not None:
            self.budget.spend(count)

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self.raw.close()

    def __enter__(self) -> LimitedReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _kind(mode: int) -> str | None:
    """What a non-regular file is ("a FIFO"), None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def refusal(path: Path, root: Path | None = None) -> str | None:
    """Why ``path`` may not be opened (or None): it must resolve, inside ``root`` when given, to a
    regular file outside /proc, /sys and /dev."""
    try:
        resolved = path.resolve(strict=True)
        mode = resolved.stat().st_mode
    except RuntimeError:
        return "a link loop: refused"
    except OSError:
        return "a broken link: refused" if path.is_symlink() else "cannot be read: refused"
    if any(resolved.is_relative_to(folder) for folder in _SYSTEM_FOLDERS) and not resolved.is_relative_to(_SHM):
        return f"links to {resolved}, a system file: refused"
    if root is not None and not resolved.is_relative_to(root.resolve()):
        return f"links to {resolved}, outside the data folder: refused"
    kind = _kind(mode)
    return f"is {kind}, not a regular file: refused" if kind else None


def check_file(path: Path, root: Path | None = None) -> Path:
    """``path`` when it may be opened, else :class:`ExportRefused` naming it and why."""
    why = refusal(path, root)
    if why is not None:
        raise ExportRefused(path, why)
    return path


def open_file(
    path: Path,
    root: Path | None = None,
    label: str | None = None,
    limits: ReadLimits | None = None,
    budget: ReadBudget | None = None,
) -> LimitedReader:
    """``path`` opened for reading within the limits, when :func:`refusal` allows it."""
    check_file(path, root)
    limits = limits or read_limits()
    label = label or str(path)
    # O_NONBLOCK: a FIFO swapped in after the check must not hang the open; fstat then refuses it.
    fd = os.open(path.resolve(), os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    info = os.fstat(fd)
    kind = _kind(info.st_mode)
    if kind is not None:
        os.close(fd)
        raise ExportRefused(label, f"is {kind}, not a regular file: refused")
    os.set_blocking(fd, True)
    if info.st_size > limits.max_member_bytes:
        os.close(fd)
        raise ExportRefused(label, limits.over("max_member_bytes", f"{info.st_size:,} bytes"))
    return LimitedReader(os.fdopen(fd, "rb"), label, limits, budget=budget)


def decode_text(
    handle: IO[bytes] | LimitedReader, label: str, limits: ReadLimits | None = None, *, message_lines: bool = True
) -> str:
    """The text of ``handle``: UTF-8 (a BOM allowed), or UTF-16/32 when a BOM says so.

    With ``message_lines`` (text exports: a message is at least one line; not JSON, which may be
    one line) a line longer than ``max_message_chars`` is refused as soon as it is read.
    Undecodable bytes are named by line and byte offset."""
    limits = limits or read_limits()
    data = handle.read(CHUNK)
    encoding = next((name for bom, name in _BOMS if data.startswith(bom)), "utf-8")
    shown = encoding.upper().removesuffix("-SIG")
    _refuse_nul_bytes(data, encoding, label)
    decoder = codecs.getincrementaldecoder(encoding)()
    pieces: list[str] = []
    offset, line, partial = 0, 1, 0  # bytes before ``data``, the current line, its characters so far
    while True:
        final = not data
        pending = len(decoder.getstate()[0])
        try:
            text = decoder.decode(data, final=final)
        except UnicodeDecodeError as exc:
            bad = exc.object[exc.start : exc.start + 1].hex() or "end"
            raise ExportFormatError(
                label,
                line + exc.object[: exc.start].count(b"\n"),
                f"not {shown} text: byte 0x{bad} at offset {offset - pending + exc.start:,} cannot be decoded",
            ) from None
        offset += len(data)
        for number, segment in enumerate(text.split("\n")):
            partial = partial + len(segment) if number == 0 else len(segment)
            if message_lines and partial > limits.max_message_chars:
                raise ExportRefused(label, limits.over("max_message_chars", f"line {line + number} is longer"))
        line += text.count("\n")
        pieces.append(text)
        if final:
            return "".join(pieces)
        data = handle.read(CHUNK)


def sniff_text(head: bytes, label: object) -> str:
    """The first bytes of a file as text for telling its format (UTF-16/32 when a BOM says so)."""
    encoding = next((name for bom, name in _BOMS if head.startswith(bom)), "utf-8")
    _refuse_nul_bytes(head, encoding, label)
    return head.decode(encoding, errors="replace")


def _refuse_nul_bytes(data: bytes, encoding: str, label: object) -> None:
    """No chat text holds NUL; UTF-16 without its BOM is full of them."""
    if encoding == "utf-8" and b"\x00" in data:
        raise ExportFormatError(
            label,
            None,
            "holds NUL bytes: UTF-16 text without a byte order mark? save it as UTF-8 (or UTF-16 with its BOM)",
        )


def checked_messages(conversation: Conversation, limits: ReadLimits | None = None) -> Iterator[ExportedMessage]:
    """The conversation's messages, refused at the first text over ``max_message_chars``."""
    limits = limits or read_limits()
    for message in conversation.messages():
        if len(message.text) > limits.max_message_chars:
            raise ExportRefused(
                conversation.source,
                limits.over("max_message_chars", f"message {message.local_id} has {len(message.text):,} characters"),
            )
        yield message
