"""A folder or a zip of an export, read one member at a time, and JSON loading that names places.

Slack, Messenger and WhatsApp exports come as a zip or as the folder it unpacks to; readers see
both through :class:`ExportTree` (member names use ``/``, relative to the tree's root).
"""

from __future__ import annotations

import json
import os
import stat
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from narrative_mirror.exports.limits import (
    ExportRefused,
    LimitedReader,
    ReadBudget,
    check_file,
    decode_text,
    open_file,
    read_limits,
)
from narrative_mirror.exports.records import ExportFormatError


class ExportTree:
    """Read-only view of a folder or a zip archive that opens only what the limits allow.

    A folder's entries are listed without following links; a member is opened only when it
    resolves to a regular file inside the folder (limits.py). A zip member is opened only when
    its name stays inside the archive and it is a regular file (no symlink entries), and it is
    unpacked as it is read, never to disk. ``budget`` shares ``max_total_bytes`` between the trees
    of one read of an archive.
    """

    def __init__(self, path: Path, budget: ReadBudget | None = None):
        self.path = path
        self.limits = budget.limits if budget is not None else read_limits()
        self.budget = budget or ReadBudget(self.limits, path)
        self._zip: zipfile.ZipFile | None = None
        self._names: list[str] | None = None
        if path.is_dir():
            return
        if path.exists() or path.is_symlink():
            check_file(path)
        if not path.is_file():
            raise ExportFormatError(path, None, "no such file or folder")
        self._refuse_many_entries(_declared_entries(path))  # before the listing costs memory
        try:
            self._zip = zipfile.ZipFile(path)
        except zipfile.BadZipFile as exc:
            raise ExportFormatError(path, None, f"not a readable zip archive ({exc})") from exc
        try:
            self._refuse_many_entries(len(self._zip.infolist()))  # a count that lied
        except ExportRefused:
            self._zip.close()
            raise

    def _refuse_many_entries(self, entries: int) -> None:
        if entries > self.limits.max_members:
            raise ExportRefused(self.path, self.limits.over("max_members", f"{entries:,} entries"))

    @property
    def is_zip(self) -> bool:
        return self._zip is not None

    def names(self) -> list[str]:
        """Every member that is not a folder, sorted (links and special files included: opening
        one says why it is refused)."""
        if self._names is None:
            if self._zip is not None:
                self._names = sorted(n for n in self._zip.namelist() if not n.endswith("/"))
            else:
                self._names = sorted(_walk(self.path))
        return self._names

    def open(self, name: str) -> LimitedReader:
        label = self.label(name)
        if self._zip is None:
            return open_file(self.path / name, self.path, label, self.limits, self.budget)
        info = self._zip.getinfo(name)
        if name.startswith("/") or ".." in name.replace("\\", "/").split("/"):
            raise ExportRefused(label, "a member name that leaves the archive: refused")
        mode = info.external_attr >> 16  # Unix mode; the file-type bits are unset in many zips
        if stat.S_IFMT(mode) not in (0, stat.S_IFREG):
            kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
            raise ExportRefused(label, f"is {kind} in the archive: refused")
        if info.file_size > self.limits.max_member_bytes:
            raise ExportRefused(label, self.limits.over("max_member_bytes", f"{info.file_size:,} bytes"))
        if info.file_size > self.limits.max_ratio * max(info.compress_size, 1):
            raise ExportRefused(
                label, self.limits.over("max_ratio", f"{info.file_size:,} bytes from {info.compress_size:,} compressed")
            )
        return LimitedReader(
            self._zip.open(info), label, self.limits, compressed=info.compress_size, budget=self.budget
        )

    def read_text(self, name: str, *, message_lines: bool = True) -> str:
        """A member's text; ``message_lines``: a line is at least one message, so a line over
        ``max_message_chars`` is refused while reading (not for JSON, which may be one line)."""
        with self.open(name) as handle:
            return decode_text(handle, self.label(name), self.limits, message_lines=message_lines)

    def label(self, name: str) -> str:
        """How errors name a member: ``export.zip!general/2024-01-02.json`` or the file path."""
        if self._zip is not None:
            return f"{self.path}!{name}"
        return str(self.path / name)

    def load_json(self, name: str) -> Any:
        return loads_json(self.read_text(name, message_lines=False), self.label(name))

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()


def _declared_entries(path: Path) -> int:
    """The entry count an archive's end record declares (0 when there is none to read)."""
    with path.open("rb") as handle:
        end = zipfile._EndRecData(handle)  # the stdlib's own reader of that record
    return end[zipfile._ECD_ENTRIES_TOTAL] if end else 0


def _walk(root: Path) -> list[str]:
    """Relative names of every entry under ``root`` that is not a folder, links not followed. A
    link to a folder inside ``root`` adds nothing (its files are listed where they are); one to a
    folder elsewhere refuses the export, which would otherwise lose those files silently."""
    found: list[str] = []
    folders = [root]
    inside = root.resolve()
    while folders:
        folder = folders.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                path = Path(entry.path)
                if entry.is_dir(follow_symlinks=False):
                    folders.append(path)
                elif entry.is_symlink() and path.is_dir():
                    if not path.resolve().is_relative_to(inside):
                        raise ExportRefused(path, f"links to {path.resolve()}, outside the data folder: refused")
                else:
                    found.append(path.relative_to(root).as_posix())
    return found


def loads_json(text: str, label: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ExportFormatError(label, exc.lineno, f"invalid JSON at column {exc.colno}: {exc.msg}") from exc


def load_json_file(path: Path, root: Path | None = None) -> Any:
    """A JSON file's value, opened only when it may be (inside ``root`` when given)."""
    with open_file(path, root) as handle:
        return loads_json(decode_text(handle, str(path), message_lines=False), str(path))


def parent_of(name: str) -> str:
    return name.rsplit("/", 1)[0] if "/" in name else ""


def base_of(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def iter_with_index(items: Any, label: str, path: str) -> Iterator[tuple[int, Any]]:
    """``enumerate`` over a JSON array, or an error naming the path when it is not one."""
    if not isinstance(items, list):
        raise ExportFormatError(label, path, f"expected an array, found {type(items).__name__}")
    return enumerate(items)


def json_error_path(handle: IO[bytes]) -> str:
    """The JSON path (``chats.list[3].messages[12].date``) where streaming ``handle`` fails."""
    import ijson

    from narrative_mirror.exports import jsonstream

    stack: list[list[Any]] = []

    def enter_value() -> None:
        if stack and stack[-1][0] == "array":
            stack[-1][1] += 1

    try:
        for _prefix, event, value in jsonstream.parse(handle):
            if event == "map_key":
                stack[-1][1] = value
            elif event in ("start_map", "start_array"):
                enter_value()
                stack.append(["map", None] if event == "start_map" else ["array", -1])
            elif event in ("end_map", "end_array"):
                stack.pop()
            else:
                enter_value()
    except ijson.JSONError:
        pass
    parts = []
    for kind, position in stack:
        if kind == "map" and position is not None:
            parts.append(f".{position}")
        elif kind == "array" and position >= 0:
            parts.append(f"[{position}]")
    return "".join(parts).lstrip(".") or "$"
