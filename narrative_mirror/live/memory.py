"""``LiveMemory.add``: a batch made durable in the chat's log, then searchable in the index; the
call behind ``POST /api/chats/{chat}/messages``, ``narrative-mirror add`` and Python callers."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from narrative_mirror.embedding import Embedder
from narrative_mirror.index_store import IndexStore
from narrative_mirror.live.index import index_new
from narrative_mirror.live.log import LiveLog, MessageError, check_chat, parse_batch
from narrative_mirror.live.source import REPLACE_HINT, choose_live

APPENDS_FILE = "appended_versions"


class FileBackedChat(MessageError):
    """A chat of the index with no live log: its messages come from a chat file, which wins."""


class AppendJournal:
    """Which ``messages`` table versions are live adds, and to which chat: one line per add
    (``<version> <chat>``) appended to ``<live root>/appended_versions`` by whichever process
    indexed it. A retriever's cache reads it when the store's versions change: versions that are
    all adds only make those chats read their new rows (``ChatCache.explain_changes``), anything
    else (a build, a forget, compaction) still drops the cache. Not fsynced: a lost line only costs
    one full read."""

    def __init__(self, path: Path):
        self.path = path
        self._offset = 0
        self._chat_at: dict[int, str] = {}
        self._lock = threading.Lock()

    def record(self, version: int, chat: str) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{version} {chat}\n".encode())
        finally:
            os.close(fd)

    def _read(self) -> None:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except FileNotFoundError:
            return
        whole = data.rfind(b"\n") + 1
        for line in data[:whole].decode().splitlines():
            version, _, chat = line.partition(" ")
            if version.isdigit() and chat:
                self._chat_at[int(version)] = chat
        self._offset += whole

    def explain(self, old: dict[str, int], new: dict[str, int]) -> list[str] | None:
        """The chats whose adds made every change from table versions ``old`` to ``new``; None
        when another table changed or a ``messages`` version was not an add."""
        if (
            "messages" not in old
            or "messages" not in new
            or new["messages"] < old["messages"]
            or any(old.get(t) != new.get(t) for t in set(old) | set(new) if t != "messages")
        ):
            return None
        with self._lock:
            self._read()
            wanted = range(old["messages"] + 1, new["messages"] + 1)
            if any(v not in self._chat_at for v in wanted):
                return None
            chats = sorted({self._chat_at[v] for v in wanted})
            for version in [v for v in self._chat_at if v <= old["messages"]]:
                del self._chat_at[version]
        return chats


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
        return {
            "chat": self.chat,
            "ids": self.ids,
            "stored": self.stored,
            "duplicates": self.duplicates,
            "created": self.created,
            "indexed": self.indexed,
            "seconds": round(self.seconds, 4),
        }


class LiveMemory:
    """Live chats: their logs under ``root`` and their rows in ``store``. ``on_appended(chat)``
    runs after new rows are in the index, in this process or (seen by ``refresh``) another (the
    serving process reads just those rows into its cached copy: ``ChatCache.mark_behind``);
    ``on_indexed(chat)`` when the chat's rows changed otherwise (a forget), and for adds too when
    there is no ``on_appended`` (the cached copy is dropped)."""

    def __init__(
        self,
        root: Path,
        store: IndexStore,
        embedder: Embedder,
        on_indexed: Callable[[str], None] | None = None,
        on_appended: Callable[[str], None] | None = None,
    ):
        self.log = LiveLog(root)
        self.store, self.embedder, self.on_indexed = store, embedder, on_indexed
        self.on_appended = on_appended or on_indexed
        self.journal = AppendJournal(self.log.root / APPENDS_FILE)
        self._seen: dict[str, tuple[int, int] | None] = {}

    def _marker_stamp(self, chat: str) -> tuple[int, int] | None:
        try:
            stat = os.stat(self.log.indexed_marker(chat))
        except (OSError, ValueError):
            return None
        return (stat.st_ino, stat.st_mtime_ns)

    def refresh(self, chat: str) -> None:
        """Call ``on_appended(chat)`` when any process indexed new messages of ``chat`` since this
        one last looked (one ``stat``): a serving process reads them before answering (the
        cache reads the chat whole when its rows were not only appended to)."""
        stamp = self._marker_stamp(chat)
        if stamp is not None and self._seen.get(chat) != stamp:
            self._seen[chat] = stamp
            if self.on_appended is not None:
                self.on_appended(chat)

    def _replace_file_chat(self, chat: str) -> None:
        """The live chat takes ``chat``'s name from a chat file: the choice is recorded (the
        build then reads the live log for that name) and the file's rows leave the index."""
        choose_live(self.log.root, chat)
        if self.log.exists(chat):  # the index holds the live chat's rows (the file was never built)
            return
        for table, frame, id_column in (
            ("messages", self.store.messages_for(chat), "message_id"),
            ("blocks", self.store.blocks_for(chat), "block_id"),
            ("threads", self.store.threads_for(chat), "thread_id"),
        ):
            if frame.height:
                self.store.delete_rows(table, chat, frame[id_column].to_list())
        if self.on_indexed is not None:
            self.on_indexed(chat)

    def add(self, chat: str, messages: Sequence[Any], *, replace_file_chat: bool = False) -> AddResult:
        """Store the batch's new messages durably, then index them (``MessageError`` names a bad
        field; ``FileBackedChat`` when ``chat`` is a chat file's, unless ``replace_file_chat``:
        then the live chat replaces it, in the index now and in every build after). Safe from
        many threads and processes: one writer per chat at a time."""
        started = time.perf_counter()
        check_chat(chat)
        drafts = parse_batch(list(messages) if isinstance(messages, list | tuple) else messages)
        with self.log.locked(chat):
            if replace_file_chat:
                self._replace_file_chat(chat)
            elif not self.log.exists(chat) and self.store.chat_row_count("messages", chat):
                raise FileBackedChat("chat", f"a chat built from a chat file has that name; {REPLACE_HINT}")
            appended = self.log.append_locked(chat, drafts)
            # every logged message the index lacks, also those of a writer that died before indexing
            indexed, version = index_new(self.store, chat, self.log.known(chat), self.embedder)
            if version is not None:
                self.journal.record(version, chat)
                self.log.mark_indexed(chat)
        if indexed and self.on_appended is not None:
            self.on_appended(chat)
        return AddResult(
            chat,
            appended.ids,
            [m.local_id for m in appended.stored],
            appended.duplicates,
            appended.created,
            indexed,
            time.perf_counter() - started,
        )


def serving_memory(root: Path, retriever: Any) -> LiveMemory:
    """The live memory of a process that searches through ``retriever`` (a ``Retriever``): the
    adds of this process and of others (seen through ``refresh`` and the append journal) grow its
    cached chats by just their new rows; a forget drops the chat's cached copy."""
    live = LiveMemory(
        root,
        retriever.store,
        retriever.embedder,
        on_indexed=retriever.invalidate,
        on_appended=retriever.cache.mark_behind,
    )
    retriever.cache.explain_changes = live.journal.explain
    return live
