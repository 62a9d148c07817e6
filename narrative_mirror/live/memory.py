"""``LiveMemory.add``: a batch made durable in the chat's log, then searchable in the index; the
call behind ``POST /api/chats/{chat}/messages``, ``narrative-mirror add`` and Python callers."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from narrative_mirror.embedding import Embedder
from narrative_mirror.index_store import IndexStore
from narrative_mirror.live.index import index_new
from narrative_mirror.live.log import LiveLog, MessageError, check_chat, parse_batch


class FileBackedChat(MessageError):
    """A chat of the index with no live log: its messages come from a chat file, which wins."""


@dataclass(frozen=True)
class AddResult:
    """What an add did: the batch's ids in order (new or stored before), the new ones, the
    duplicates, whether the chat was created, how many rows were indexed, and the time it took."""

    chat: str
    ids: list[str]
    stored: list[str]
    duplicates: list[str]
    created: bool
    indexed: int
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"chat": self.chat, "ids": self.ids, "stored": self.stored, "duplicates": self.duplicates,
                "created": self.created, "indexed": self.indexed, "seconds": round(self.seconds, 4)}


class LiveMemory:
    """Live chats: their logs under ``root`` and their rows in ``store``. ``on_indexed(chat)``
    runs after new rows are in the index (the serving process drops its cached copy of the chat)."""

    def __init__(self, root: Path, store: IndexStore, embedder: Embedder,
                 on_indexed: Callable[[str], None] | None = None):
        self.log = LiveLog(root)
        self.store, self.embedder, self.on_indexed = store, embedder, on_indexed
        self._seen: dict[str, tuple[int, int] | None] = {}

    def _marker(self, chat: str) -> Path:
        return self.log.root / f"{chat}.indexed"

    def _mark_indexed(self, chat: str) -> None:
        """Replace the chat's marker (a new file each time): other processes see new rows by it."""
        fd, tmp = tempfile.mkstemp(prefix=f".{chat}.", suffix=".tmp", dir=self.log.root)
        os.close(fd)
        os.replace(tmp, self._marker(chat))

    def _marker_stamp(self, chat: str) -> tuple[int, int] | None:
        try:
            stat = os.stat(self._marker(chat))
        except (OSError, ValueError):
            return None
        return (stat.st_ino, stat.st_mtime_ns)

    def refresh(self, chat: str) -> None:
        """Call ``on_indexed(chat)`` when any process indexed new messages of ``chat`` since this
        one last looked (one ``stat``): a serving process reads the chat again before answering."""
        stamp = self._marker_stamp(chat)
        if stamp is not None and self._seen.get(chat) != stamp:
            self._seen[chat] = stamp
            if self.on_indexed is not None:
                self.on_indexed(chat)

    def add(self, chat: str, messages: Sequence[Any]) -> AddResult:
        """Store the batch's new messages durably, then index them (``MessageError`` names a bad
        field; ``FileBackedChat`` when ``chat`` is a chat file's). Safe from many threads and
        processes: one writer per chat at a time."""
        started = time.perf_counter()
        check_chat(chat)
        drafts = parse_batch(list(messages) if isinstance(messages, list | tuple) else messages)
        with self.log.locked(chat):
            if not self.log.exists(chat) and self.store.chat_row_count("messages", chat):
                raise FileBackedChat("chat", "a chat built from a chat file has that name; a live chat and a "
                                             "file-backed chat cannot share it")
            appended = self.log.append_locked(chat, drafts)
            # every logged message the index lacks, also those of a writer that died before indexing
            indexed = index_new(self.store, chat, self.log.known(chat), self.embedder)
            if indexed:
                self._mark_indexed(chat)
        if indexed and self.on_indexed is not None:
            self.on_indexed(chat)
        return AddResult(chat, appended.ids, [m.local_id for m in appended.stored], appended.duplicates,
                         appended.created, indexed, time.perf_counter() - started)
