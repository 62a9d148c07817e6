"""The chats a retriever keeps in memory: a least-recently-used cache of ``ChatIndex`` bounded by
their estimated size, refreshed when the store is re-indexed, grown by the rows appended to a chat
(a live chat's adds: only those rows are read), each chat loaded once however many threads wait
for it."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from narrative_mirror.index_store import IndexStore
from narrative_mirror.retrieval.chat_append import NotAppendable, appended
from narrative_mirror.retrieval.chat_index import ChatIndex
from narrative_mirror.retrieval.ram_use import release_free_memory

# Estimated memory of the chats kept in memory (retrieval.toml [cache] max_mb overrides it):
# ChatIndex.nbytes is ~150 MB for a 44,720-message chat, ~3 MB for Chat_1 (476 messages).
DEFAULT_CACHE_MB = 1024.0


class _Loading:
    """A chat being read by one thread while others wait for it."""

    def __init__(self):
        self.done = threading.Event()
        self.index: ChatIndex | None = None
        self.error: BaseException | None = None
        self.stale = False  # invalidated meanwhile: answer the waiters, but do not keep it
        self.behind = False  # rows appended meanwhile: keep it, caught up at the next query


class ChatCache:
    """Chats in memory, least recently used dropped first once their estimated size
    (``ChatIndex.nbytes``) passes ``max_bytes``; a chat larger than that is answered from a fresh
    read each time and not kept. At most every ``REFRESH_SECONDS`` the store's table versions are
    compared (~2 ms) and a re-indexed store drops the cache, so a long-lived retriever never serves
    rows older than that. Thread-safe: a chat is loaded (``read``) once however many queries wait
    for it, one chat at a time, and cached chats answer while another loads.

    A chat marked behind (``mark_behind``: rows were appended to it) is caught up at its next
    query: only the rows past its last cached position are read and appended
    (``chat_append.appended``), checked against the store's row count (a full read when they
    differ). ``explain_changes(old, new)``, when set, names the chats whose appends account for
    every table version change (None when something else changed): only those are caught up,
    instead of the whole cache being dropped."""

    REFRESH_SECONDS = 2.0

    def __init__(self, store: IndexStore, read: Callable[[str], ChatIndex], max_bytes: int):
        self.store = store
        self.max_bytes = max_bytes
        self._read = read
        self._chats: OrderedDict[str, ChatIndex] = OrderedDict()  # least recently used first
        self._cached_bytes = 0
        self._loading: dict[str, _Loading] = {}
        self._stats = {"hits": 0, "loads": 0, "evictions": 0, "not_kept": 0, "appends": 0}
        self._behind: set[str] = set()
        self.explain_changes: Callable[[dict[str, int], dict[str, int]], list[str] | None] | None = None
        self._load_seconds: dict[str, float] = {}
        self._versions: dict[str, int] = {}
        self._versions_checked = float("-inf")
        self._cache_lock = threading.Lock()
        self._load_lock = threading.Lock()  # one chat read at a time: one load's memory at a time

    def _drop(self, chat_file: str | None) -> None:
        """Forget one cached chat (or all); loads in flight are answered but not kept. Lock held."""
        names = list(self._chats) if chat_file is None else [chat_file]
        for name in names:
            index = self._chats.pop(name, None)
            if index is not None:
                self._cached_bytes -= index.nbytes
            self._behind.discard(name)
        for name in [n for n in self._loading if chat_file is None or n == chat_file]:
            self._loading.pop(name).stale = True  # the next query reads the chat afresh

    def mark_behind(self, chat_file: str) -> None:
        """Rows were appended to ``chat_file``: its next query reads them (also when a load in
        flight missed them)."""
        with self._cache_lock:
            self._mark_behind(chat_file)

    def _mark_behind(self, chat_file: str) -> None:
        if chat_file in self._chats:
            self._behind.add(chat_file)
        loading = self._loading.get(chat_file)
        if loading is not None:
            loading.behind = True

    def invalidate(self, chat_file: str | None = None) -> None:
        """Forget the in-memory copy of one chat (or all), e.g. after it was re-indexed."""
        with self._cache_lock:
            self._drop(chat_file)

    def info(self) -> dict:
        """What the cache holds: bytes (estimated) per chat, least recently used first, the bound,
        hits / loads / evictions / chats too large to keep, last load seconds."""
        with self._cache_lock:
            return {
                "max_bytes": self.max_bytes,
                "bytes": self._cached_bytes,
                "chats": {name: index.nbytes for name, index in self._chats.items()},
                **self._stats,
                "load_seconds": {k: round(v, 3) for k, v in self._load_seconds.items()},
            }

    def get(self, chat_file: str) -> ChatIndex:
        with self._cache_lock:
            now = time.monotonic()
            if now - self._versions_checked >= self.REFRESH_SECONDS:
                versions = self.store.versions()
                if versions != self._versions:
                    appended_to = self.explain_changes(self._versions, versions) if self.explain_changes else None
                    if appended_to is None:
                        self._drop(None)
                    for name in appended_to or []:
                        self._mark_behind(name)
                    self._versions = versions
                self._versions_checked = now
            cached = self._chats.get(chat_file)
            behind = None
            if cached is not None and chat_file in self._behind:
                behind = self._chats.pop(chat_file)  # caught up by the leader below
                self._cached_bytes -= behind.nbytes
                self._behind.discard(chat_file)
            elif cached is not None:
                self._chats.move_to_end(chat_file)
                self._stats["hits"] += 1
                return cached
            loading = self._loading.get(chat_file)
            leader = loading is None
            if leader:
                loading = self._loading[chat_file] = _Loading()
        if not leader:
            loading.done.wait()
            if loading.error is not None:
                raise loading.error
            return loading.index
        try:
            with self._load_lock:
                loading.index = self._catch_up(chat_file, behind) if behind is not None else self._load(chat_file)
                release_free_memory()  # the load's temporaries
        except BaseException as exc:
            loading.error = exc
            raise
        finally:
            with self._cache_lock:
                if self._loading.get(chat_file) is loading:
                    del self._loading[chat_file]
                if loading.index is not None and not loading.stale:
                    self._keep(chat_file, loading.index)
                    if loading.behind and chat_file in self._chats:
                        self._behind.add(chat_file)
            loading.done.set()
        return loading.index

    def _load(self, chat_file: str) -> ChatIndex:
        started = time.perf_counter()
        index = self._read(chat_file)
        with self._cache_lock:
            self._stats["loads"] += 1
            self._load_seconds[chat_file] = time.perf_counter() - started
        return index

    def _catch_up(self, chat_file: str, cached: ChatIndex) -> ChatIndex:
        """``cached`` with the rows appended since it was read; a full read when they are not
        simply appended (a forget or a rebuild meanwhile)."""
        started = time.perf_counter()
        try:
            index = appended(cached, self.store.messages_for(chat_file, after_position=cached.positions[-1]))
        except NotAppendable:
            return self._load(chat_file)
        if index.size != self.store.chat_row_count("messages", chat_file):
            return self._load(chat_file)
        with self._cache_lock:
            self._stats["appends"] += 1
            self._load_seconds[chat_file] = time.perf_counter() - started
        return index

    def _keep(self, chat_file: str, index: ChatIndex) -> None:
        """Cache ``index`` and drop least recently used chats past the bound. Lock held."""
        if index.nbytes > self.max_bytes:
            self._stats["not_kept"] += 1
            return
        self._chats[chat_file] = index
        self._cached_bytes += index.nbytes
        while self._cached_bytes > self.max_bytes:
            _, dropped = self._chats.popitem(last=False)
            self._cached_bytes -= dropped.nbytes
            self._stats["evictions"] += 1
