"""The durable log of a live chat: one append-only JSON-lines file per chat
(``<root>/<chat>.jsonl``), the chat's source of truth.

A batch is appended under the chat's lock (a thread lock and an ``flock`` on ``<chat>.lock``, so
writers in several threads and processes are serialized) and fsynced before ``append`` returns:
a returned batch survives a crash. A line cut by a crash mid-write (no final newline) was never
acknowledged: it is ignored when read and cut off before the next append. A message is stored
once: re-sending one with the same client id, or the same author + UTC time + text, stores
nothing (``append`` says which were duplicates).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from narrative_mirror.keys import PartitionKeyError, validate_partition_key
from narrative_mirror.storage import write_atomically

LOG_SUFFIX = ".jsonl"
MAX_BATCH = 1000
MAX_TEXT_CHARS = 20_000
_CLIENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")
_FIELDS = {"id", "author", "text", "timestamp", "reply_to"}


class MessageError(ValueError):
    """A batch that cannot be stored; ``field`` names what is wrong (e.g. ``messages[2].timestamp``)."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field, self.reason = field_name, message


@dataclass(frozen=True)
class LiveMessage:
    """One stored message: its local id, order in the chat, author, text, UTC time (naive), the
    timestamp as the client wrote it, and the id it replies to."""

    local_id: str
    position: int
    author: str
    text: str
    timestamp: datetime
    timestamp_given: str
    reply_to: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.local_id,
            "position": self.position,
            "author": self.author,
            "text": self.text,
            "timestamp": self.timestamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "timestamp_given": self.timestamp_given,
            "reply_to": self.reply_to,
        }

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> LiveMessage:
        return cls(
            row["id"],
            int(row["position"]),
            row["author"],
            row["text"],
            datetime.strptime(row["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ"),
            row["timestamp_given"],
            row.get("reply_to"),
        )

    @property
    def content_key(self) -> str:
        """What makes two messages without ids the same message: author, UTC time, text."""
        return hashlib.sha256(json.dumps([self.author, self.timestamp.isoformat(), self.text]).encode()).hexdigest()


def utc_time(value: Any, where: str) -> datetime:
    """The naive UTC time of an ISO 8601 timestamp (one without an offset is taken as UTC)."""
    if not isinstance(value, str) or not value.strip():
        raise MessageError(where, "must be an ISO 8601 time string, e.g. 2025-03-01T09:00:00Z")
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise MessageError(where, f"not an ISO 8601 time: {value[:40]!r}") from None
    return parsed.astimezone(UTC).replace(tzinfo=None) if parsed.tzinfo else parsed


def check_chat(chat: str) -> str:
    try:
        return validate_partition_key(chat)
    except PartitionKeyError as exc:
        raise MessageError("chat", str(exc)) from None


@dataclass
class _Draft:
    client_id: str | None
    author: str
    text: str
    timestamp: datetime
    timestamp_given: str
    reply_to: str | None


def parse_batch(messages: Any) -> list[_Draft]:
    """The batch's messages, checked; ``MessageError`` names the first bad field."""
    if not isinstance(messages, list) or not messages:
        raise MessageError("messages", "must be a non-empty list of messages")
    if len(messages) > MAX_BATCH:
        raise MessageError("messages", f"at most {MAX_BATCH} messages per batch, got {len(messages)}")
    drafts = []
    for i, row in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(row, dict):
            raise MessageError(where, "must be an object with author, text and timestamp")
        unknown = sorted(set(row) - _FIELDS)
        if unknown:
            raise MessageError(f"{where}.{unknown[0]}", f"unknown field; allowed: {sorted(_FIELDS)}")
        for name in ("author", "text"):
            value = row.get(name)
            if not isinstance(value, str) or not value.strip():
                raise MessageError(f"{where}.{name}", "must be a non-empty string")
        if len(row["text"]) > MAX_TEXT_CHARS:
            raise MessageError(f"{where}.text", f"longer than {MAX_TEXT_CHARS} characters")
        ids = {}
        for name in ("id", "reply_to"):
            value = row.get(name)
            if value is not None and (not isinstance(value, str) or not _CLIENT_ID.match(value)):
                raise MessageError(f"{where}.{name}", "must be 1-128 letters, digits or '_.:-'")
            ids[name] = value
        if ids["id"] is not None and ids["id"].startswith("L") and ids["id"][1:].isdigit():
            raise MessageError(f"{where}.id", "ids L<number> are the ones given to messages sent without an id")
        given = row.get("timestamp")
        drafts.append(
            _Draft(
                ids["id"],
                row["author"].strip(),
                row["text"],
                utc_time(given, f"{where}.timestamp"),
                given,
                ids["reply_to"],
            )
        )
    return drafts


@dataclass
class _ChatState:
    """What one process knows of a chat's log: how far it has read, ids and content keys, and the
    next position (never reused, also after a forget: a forgotten message leaves a tombstone)."""

    offset: int = 0
    messages: list[LiveMessage] = field(default_factory=list)
    ids: dict[str, LiveMessage] = field(default_factory=dict)
    contents: dict[str, LiveMessage] = field(default_factory=dict)
    next_position: int = 0
    inode: int | None = None  # of the file read: a forget replaces the file, and reading starts over

    def take(self, message: LiveMessage) -> None:
        self.messages.append(message)
        self.ids[message.local_id] = message
        self.contents[message.content_key] = message
        self.next_position = max(self.next_position, message.position + 1)

    def read(self, row: Mapping[str, Any]) -> None:
        if row.get("forgotten"):  # a tombstone: no text, only the position it held
            self.next_position = max(self.next_position, int(row["position"]) + 1)
        else:
            self.take(LiveMessage.from_json(row))


@dataclass(frozen=True)
class Appended:
    """What ``append`` did: the batch's ids in order, which were new, which were stored before."""

    ids: list[str]
    stored: list[LiveMessage]
    duplicates: list[str]
    created: bool


class LiveLog:
    """The logs of every live chat under ``root`` (``<NM_HOME>/live``)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._states: dict[str, _ChatState] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def path(self, chat: str) -> Path:
        return self.root / f"{check_chat(chat)}{LOG_SUFFIX}"

    def chats(self) -> list[str]:
        """The live chats (those with a log)."""
        return (
            sorted(p.name[: -len(LOG_SUFFIX)] for p in self.root.glob(f"*{LOG_SUFFIX}")) if self.root.is_dir() else []
        )

    def exists(self, chat: str) -> bool:
        return self.path(chat).is_file()

    def indexed_marker(self, chat: str) -> Path:
        return self.root / f"{chat}.indexed"

    def mark_indexed(self, chat: str) -> None:
        """Replace the chat's marker by a new file: its inode tells other processes the chat's
        indexed rows changed (LiveMemory.refresh reads the chat again)."""
        fd, tmp = tempfile.mkstemp(prefix=f".{chat}.", suffix=".tmp", dir=self.root)
        os.close(fd)
        os.replace(tmp, self.indexed_marker(chat))

    @contextmanager
    def locked(self, chat: str) -> Iterator[None]:
        """The chat's lock: one writer at a time in this process and across processes."""
        check_chat(chat)
        with self._guard:
            lock = self._locks.setdefault(chat, threading.Lock())
        with lock:
            self.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.root / f"{chat}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # closing releases the flock

    def messages(self, chat: str) -> list[LiveMessage]:
        """The chat's acknowledged messages, in order (a read, no lock: a torn last line is skipped)."""
        state = _ChatState()
        self._catch_up(chat, state, repair=False)
        return state.messages

    def _catch_up(self, chat: str, state: _ChatState, *, repair: bool) -> None:
        """Read what was appended since ``state.offset``; with ``repair`` (lock held) cut off a
        torn last line, which no writer acknowledged."""
        path = self.path(chat)
        try:
            handle = open(path, "rb")
        except FileNotFoundError:
            return
        with handle:
            inode = os.fstat(handle.fileno()).st_ino
            if state.inode is not None and inode != state.inode:
                state.__dict__.update(_ChatState().__dict__)  # rewritten by a forget: read it anew
            state.inode = inode
            handle.seek(state.offset)
            data = handle.read()
        whole = data.rfind(b"\n") + 1
        for line in data[:whole].splitlines():
            if line.strip():
                state.read(json.loads(line))
        state.offset += whole
        if repair and whole < len(data):
            with open(path, "r+b") as handle:
                handle.truncate(state.offset)
                os.fsync(handle.fileno())

    def append(self, chat: str, messages: Sequence[Any]) -> Appended:
        """Store the new messages of a batch durably (fsync before returning), skipping those
        stored before; the chat's log is created by its first batch."""
        drafts = parse_batch(list(messages))
        with self.locked(chat):
            return self.append_locked(chat, drafts)

    def known(self, chat: str) -> list[LiveMessage]:
        """The chat's messages as this process last read them (current while the lock is held
        after an append)."""
        state = self._states.get(chat)
        return list(state.messages) if state is not None else []

    def append_locked(self, chat: str, drafts: list[_Draft]) -> Appended:
        """``append`` of checked messages (``parse_batch``) with the chat's lock held."""
        path = self.path(chat)
        created = not path.exists()
        state = self._states.setdefault(chat, _ChatState())
        if created:
            state = self._states[chat] = _ChatState()  # a log removed meanwhile starts again
        self._catch_up(chat, state, repair=True)
        ids: list[str] = []
        stored: list[LiveMessage] = []
        duplicates: list[str] = []
        position = state.next_position
        batch_ids: dict[str, LiveMessage] = {}
        batch_contents: dict[str, LiveMessage] = {}
        for draft in drafts:
            candidate = LiveMessage(
                draft.client_id or f"L{position}",
                position,
                draft.author,
                draft.text,
                draft.timestamp,
                draft.timestamp_given,
                draft.reply_to,
            )
            same_id = (state.ids.get(draft.client_id) or batch_ids.get(draft.client_id)) if draft.client_id else None
            before = same_id or state.contents.get(candidate.content_key) or batch_contents.get(candidate.content_key)
            if before is not None:
                ids.append(before.local_id)
                duplicates.append(before.local_id)
                continue
            stored.append(candidate)
            batch_ids[candidate.local_id] = batch_contents[candidate.content_key] = candidate
            ids.append(candidate.local_id)
            position += 1
        if stored:
            self._write(path, stored, created)
            for message in stored:
                state.take(message)
            state.offset = path.stat().st_size
        return Appended(ids, stored, duplicates, created)

    def select(
        self,
        chat: str,
        *,
        ids: Sequence[str] | None = None,
        author: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[LiveMessage]:
        """The chat's messages a forget names: those with one of ``ids``, else those of ``author``
        (exact, after trimming) written in [``since``, ``until``) (naive UTC; either may be None);
        with no criterion at all, every message of the chat."""
        chosen = self.messages(chat)
        if ids is not None:
            wanted = set(ids)
            return [m for m in chosen if m.local_id in wanted]
        if author is not None:
            chosen = [m for m in chosen if m.author == author.strip()]
        if since is not None:
            chosen = [m for m in chosen if m.timestamp >= since]
        if until is not None:
            chosen = [m for m in chosen if m.timestamp < until]
        return chosen

    def forget_locked(self, chat: str, local_ids: Sequence[str]) -> int:
        """Remove messages ``local_ids`` from the chat's log (the chat's lock held): the log is
        rewritten without their text (a tombstone keeps each position, so positions are never
        reused) and replaces the old one atomically (fsynced file, then folder). Returns how many
        lines became tombstones (0 when none was there: redoing a forget changes nothing)."""
        path = self.path(chat)
        if not path.exists():
            return 0
        wanted = set(local_ids)
        lines, removed = [], 0
        data = path.read_bytes()
        for line in data[: data.rfind(b"\n") + 1].splitlines():  # a torn last line was never acknowledged
            row = json.loads(line) if line.strip() else None
            if row is not None and not row.get("forgotten") and row["id"] in wanted:
                row = {"id": f"forgotten-{row['position']}", "position": row["position"], "forgotten": True}
                removed += 1
            if row is not None:
                lines.append(json.dumps(row, ensure_ascii=False).encode() + b"\n")
        if removed:
            write_atomically(self.path(chat), b"".join(lines))
        self._states[chat] = fresh = _ChatState()
        self._catch_up(chat, fresh, repair=False)
        return removed

    def remove_locked(self, chat: str) -> int:
        """Delete the chat's log (a whole chat forgotten; the chat's lock held); returns how many
        messages it held. A later add creates the chat anew."""
        path = self.path(chat)
        if not path.exists():
            return 0
        count = len(self.messages(chat))
        path.unlink()
        self._fsync_dir()
        self._states.pop(chat, None)
        return count

    def _fsync_dir(self) -> None:
        dir_fd = os.open(self.root, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def _write(self, path: Path, stored: list[LiveMessage], created: bool) -> None:
        payload = b"".join(json.dumps(m.to_json(), ensure_ascii=False).encode() + b"\n" for m in stored)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        size = os.fstat(fd).st_size
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except BaseException:
            os.ftruncate(fd, size)  # a batch not acknowledged leaves no line behind
            raise
        finally:
            os.close(fd)
        if created:  # the new file's directory entry is durable too
            self._fsync_dir()
