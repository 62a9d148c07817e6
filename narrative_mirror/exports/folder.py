"""The chats of a data folder: RealTalk/LoCoMo chat files and chat exports side by side.

Each chat becomes one partition: a RealTalk/LoCoMo ``*.json`` file is one (key: its stem), an
export file, folder or zip is one per conversation it holds (key: the reader's
``conversation_key``, stable across re-exports). A chat's version is its content hash: the
file's bytes for a chat file; for an export, the hash of the conversation's parsed messages and
of the reading options, so a newer export changes only the conversations that changed.

Parsing a big export takes a while, so what a scan found is kept per export (in memory and, when
the caller gives a folder, on disk) under a signature of its files' names, sizes and times and
the options: an unchanged export is not parsed again. A bad export is a problem line naming the
file, the line or JSON path and what is wrong; the other chats are still found.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from narrative_mirror.exports.archive import ExportTree, base_of
from narrative_mirror.exports.limits import ExportRefused, checked_messages, read_limits, refusal
from narrative_mirror.exports.reader import detect, read_export
from narrative_mirror.exports.records import ExportFormatError, unique_key
from narrative_mirror.exports.slack import DAY_FILE
from narrative_mirror.home import Home
from narrative_mirror.keys import ARCS_SUFFIX, PartitionKeyError, partition_key_for
from narrative_mirror.storage import write_atomically

NATIVE = "native"  # a RealTalk or LoCoMo chat file
EXPORT_SUFFIXES = (".txt", ".zip", ".json")
PROGRESS_EVERY_S = 5.0
_CACHE_VERSION = 2  # 2: readable keys and each chat's native id

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ImportOptions:
    """How exports are read: ``format`` forces a reader, ``tz`` is the zone of local-time
    formats (else ``machine_tz``, the machine's zone the caller passes), ``day_first`` settles
    WhatsApp's day/month order when the file cannot, ``session_gap_hours`` the silence that
    starts a session (in the version, so that a new gap rebuilds the exports, not every chat)."""

    format: str | None = None
    tz: str | None = None
    day_first: bool | None = None
    machine_tz: str | None = None
    session_gap_hours: float = 4.0  # layers.toml [sessions]: part of an export chat's version

    def token(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


@dataclass(frozen=True)
class ChatSource:
    key: str
    path: Path  # the chat file, or the export (file, folder or zip) holding the conversation
    format: str  # NATIVE or an export format
    version: str
    title: str = ""
    # An export's chat: the key its reader gave it (``key`` differs when a suffix set it apart
    # from another chat of the same name) and its native id ("" when the format has none).
    conversation: str = ""
    native_id: str = ""

    def is_conversation(self, conversation) -> bool:
        """Whether ``conversation`` (read from this source's export) is this chat."""
        return conversation.key == (self.conversation or self.key) and conversation.native_id == self.native_id


def find_folder_chats(
    data_dir: Path,
    options: ImportOptions = ImportOptions(),
    cache_dir: Path | None = None,
    progress: Progress | None = None,
) -> tuple[dict[str, ChatSource], list[str]]:
    """Every chat of ``data_dir`` by partition key, and one problem line per file that gave none."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise FileNotFoundError(f"data folder {data_dir} does not exist or is not a folder")
    folder = data_dir.resolve()
    found: list[ChatSource] = []
    problems: list[str] = []
    for path in sorted(data_dir.iterdir()):
        if path.name.startswith(".") or path.name.endswith(ARCS_SUFFIX) or path.name == "__pycache__":
            continue
        if path.is_symlink() and path.resolve().parent != folder:
            problems.append(f"{path}: links to {path.resolve()}, outside the data folder: skipped")
            continue
        if not (path.is_dir() or path.suffix in EXPORT_SUFFIXES):
            continue
        if not path.is_dir() and (why := refusal(path, folder)) is not None:
            problems.append(f"{path}: {why}")
            continue
        if path.is_dir() and options.format is None:
            held = _holds_export(path)
            if isinstance(held, str):
                problems.append(held)
            if held is not True:
                continue  # a folder no reader recognizes (notes, a state folder) is not a chat
        if path.is_file() and path.suffix == ".json" and _is_native(path):
            try:
                found.append(ChatSource(partition_key_for(path), path, NATIVE, file_version(path), path.stem))
            except PartitionKeyError as exc:
                problems.append(str(exc))
            continue
        sources_found, found_problems = scan_export(path, options, cache_dir, progress)
        problems += found_problems
        found += sources_found
    return _unique_keys(found, problems), problems


def _identity(source: ChatSource) -> str:
    return source.native_id or source.path.name


def _unique_keys(found: list[ChatSource], problems: list[str]) -> dict[str, ChatSource]:
    """The chats by key. Chats whose names give one key each get a suffix from their native id
    (else their export's file name): stable whatever else the folder holds, while their name stays
    shared. The same chat twice (same key and identity: two exports of it) is one problem line."""
    by_key: dict[str, list[ChatSource]] = {}
    for source in found:
        by_key.setdefault(source.key, []).append(source)
    chats: dict[str, ChatSource] = {}
    for key, sources in by_key.items():
        if len(sources) > 1:
            sources = [
                replace(s, key=unique_key(key, _identity(s)), conversation=s.conversation or s.key) for s in sources
            ]
        for source in sources:
            if source.key in chats:
                problems.append(f"{source.path}: partition key {source.key!r} already used by {chats[source.key].path}")
            else:
                chats[source.key] = source
    return chats


def _holds_export(folder: Path) -> bool | str:
    """True when a reader recognizes the folder; a problem line when it looks like a broken
    export (Slack day files without the index that names their channels, a link out); else False."""
    try:
        detect(folder)
    except ExportRefused:
        return True  # reading it says what is refused
    except (ExportFormatError, OSError):
        try:
            names = ExportTree(folder).names()
        except (ExportFormatError, OSError):
            return False
        if any(DAY_FILE.match(base_of(name)) and "/" in name for name in names):
            return (
                f"{folder}: holds Slack day files (YYYY-MM-DD.json) but neither channels.json nor "
                "users.json: not readable as an export"
            )
        return False
    return True


def _is_native(path: Path) -> bool:
    """A ``.json`` file that no export reader claims is a RealTalk/LoCoMo chat file (a broken one
    too: reading it reports what is wrong). Remembered per file state: detecting streams the file."""
    info = path.stat()
    state = (str(path.resolve()), info.st_size, info.st_mtime_ns)
    if state not in _NATIVE:
        try:
            detect(path)
            _NATIVE[state] = False
        except (ExportFormatError, OSError, ValueError, RecursionError):
            _NATIVE[state] = True
    return _NATIVE[state]


_NATIVE: dict[tuple[str, int, int], bool] = {}


def scan_export(
    path: Path, options: ImportOptions, cache_dir: Path | None = None, progress: Progress | None = None
) -> tuple[list[ChatSource], list[str]]:
    """The conversations of one export with their versions, and its problems (cached)."""
    signature = _signature(path, options)
    cache_file = (
        cache_dir / f"{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:24]}.json" if cache_dir else None
    )
    cached = _MEMORY.get(str(path.resolve()))
    if cached is None and cache_file is not None and cache_file.is_file():
        try:
            cached = json.loads(cache_file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            cached = None
    if not (isinstance(cached, dict) and cached.get("signature") == signature):
        cached = {"signature": signature, **_parse(path, options, progress)}
        _MEMORY[str(path.resolve())] = cached
        if cache_file is not None:
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(cache_file, json.dumps(cached).encode("utf-8"))
    sources = [
        ChatSource(c["key"], path, c["format"], c["version"], c["title"], native_id=c["native_id"])
        for c in cached["chats"]
    ]
    return sources, list(cached["problems"])


_MEMORY: dict[str, dict] = {}


def _parse(path: Path, options: ImportOptions, progress: Progress | None) -> dict:
    chats: list[dict] = []
    problems: list[str] = []
    started = last = time.monotonic()
    try:
        fmt = options.format or detect(path)
        conversations = read_export(path, fmt, options.tz, options.day_first, machine_tz=options.machine_tz)
        messages_seen = 0
        while True:
            try:
                conversation = next(conversations)
            except StopIteration:
                break
            digest = hashlib.sha256(f"{fmt}\x1f{options.token()}".encode())
            try:
                for message in checked_messages(conversation):
                    digest.update(repr(message).encode("utf-8"))
                    messages_seen += 1
                    if progress is not None and time.monotonic() - last >= PROGRESS_EVERY_S:
                        last = time.monotonic()
                        progress(
                            f"{path.name}: parsed {messages_seen:,} messages "
                            f"({len(chats)} chats done, {last - started:.0f} s)"
                        )
            except ExportFormatError as exc:
                problems.append(" ".join(str(exc).split()))
                continue
            chats.append(
                {
                    "key": conversation.key,
                    "format": fmt,
                    "title": conversation.title,
                    "native_id": conversation.native_id,
                    "version": digest.hexdigest()[:32],
                }
            )
        if progress is not None and time.monotonic() - started >= PROGRESS_EVERY_S:
            progress(
                f"{path.name}: {len(chats)} chats, {messages_seen:,} messages parsed in "
                f"{time.monotonic() - started:.0f} s"
            )
    except ExportFormatError as exc:
        problems.append(" ".join(str(exc).split()))
    except (PartitionKeyError, OSError, UnicodeDecodeError) as exc:
        problems.append(f"{path}: {' '.join(str(exc).split())}")
    except RecursionError:
        problems.append(f"{path}: nested too deeply to read (no chat export nests this deep)")
    return {"chats": chats, "problems": problems}


def _signature(path: Path, options: ImportOptions) -> str:
    """Names, sizes and modification times of the export's files, the options and this module's
    cache format: any change means a new parse."""
    h = hashlib.sha256(f"{_CACHE_VERSION}\x1f{options.token()}\x1f{read_limits().token()}".encode())
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        info = file.stat()
        h.update(
            f"{file.relative_to(path) if path.is_dir() else file.name}\x1f{info.st_size}\x1f{info.st_mtime_ns}\n".encode(
                "utf-8", "surrogateescape"
            )
        )
    return h.hexdigest()[:32]


def file_version(path: Path) -> str:
    """Content hash of a file, or of a folder's files (their relative names and bytes)."""
    path = Path(path)
    if not path.is_dir():
        return hashlib.sha256(path.read_bytes()).hexdigest()[:32]
    h = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(file.relative_to(path).as_posix().encode("utf-8", "surrogateescape") + b"\0")
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:32]


def remembered_options(home: Path, data_dir: Path, given: ImportOptions | None, machine_tz: str) -> ImportOptions:
    """The reading options of ``data_dir`` on this home: ``given`` (the command's flags) is saved
    and used; without it, what an earlier command saved (so the daemon and later commands read
    the folder the same way and nothing is rebuilt back and forth); else the defaults."""
    store = Home(home).import_options
    try:
        saved = json.loads(store.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        saved = {}
    saved = saved if isinstance(saved, dict) else {}
    folder = str(Path(data_dir).resolve())
    if given is not None and (given.format, given.tz, given.day_first) != (None, None, None):
        entry = {"format": given.format, "tz": given.tz, "day_first": given.day_first}
        if saved.get(folder) != entry:
            saved[folder] = entry
            store.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(store, json.dumps(saved, indent=1).encode("utf-8"))
    entry = saved.get(folder) if isinstance(saved.get(folder), dict) else {}
    return ImportOptions(
        format=entry.get("format"), tz=entry.get("tz"), day_first=entry.get("day_first"), machine_tz=machine_tz
    )
