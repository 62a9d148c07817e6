"""What the index holds, kept in memory for health and for the chat checks of every request.

Reading the chat list scans the messages table (~10 ms on a tiny index, far more on a big one
and under load), so it is not done per request: ``StoreState`` keeps the last reading and reads
again when the store changed on disk (a local store: one ``stat`` of the messages table's version
folder, which every write, drop and deletion changes) or when the reading is older than
``refresh_s`` (object stores, and damage that changes no version). A change is read before the
answer (health turns degraded the moment the store goes away); an old reading is answered while
a new one is read in the background. One reading at a time, shared by every request waiting,
on the thread the caller hands in (the API's own state thread: never queued behind searches).
Health waits for a change's reading at most ``HEALTH_WAIT_S``, then answers with the last one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_REFRESH_S = 5.0
HEALTH_WAIT_S = 1.0  # longest health waits for the reading of a store that changed (none under a search flood)


@dataclass(frozen=True)
class IndexReading:
    """One reading of the index: the chats with messages, whether the messages table exists, and
    why the index could not be read (None when it could)."""

    chats: frozenset[str]
    table_exists: bool
    error: str | None = None


class StoreState:
    """The latest ``IndexReading`` of ``retriever``'s store; ``seen``: every chat any reading
    held (one without rows now is lost, not unknown); ``readings`` counts the table reads."""

    def __init__(self, retriever: Any, refresh_s: float = DEFAULT_REFRESH_S):
        self.retriever, self.refresh_s = retriever, refresh_s
        self.readings = 0
        self.seen: frozenset[str] = frozenset()
        self._reading: IndexReading | None = None
        self._stamp: Any = None
        self._read_at = -float("inf")
        self._pending: asyncio.Future | None = None
        self._forgets = 0  # whole chats forgotten: a reading begun before one does not add it back to seen
        store = getattr(retriever, "store", None)
        uri = str(getattr(store, "uri", "") or "")
        # a folder store: its messages table's version folder tells when to read again
        self._versions = Path(uri) / "messages.lance" / "_versions" if uri and "://" not in uri else None

    def _stamp_now(self) -> Any:
        if self._versions is None:
            return None
        try:
            stat = os.stat(self._versions)
        except OSError as exc:
            return ("unreadable", exc.errno)
        return (stat.st_ino, stat.st_mtime_ns)

    def _read(self) -> IndexReading:
        """Reads the index (a worker thread): the chat list, and whether the table exists when no
        chat is indexed."""
        self.readings += 1
        try:
            chats = self.retriever.chat_files()
            store = getattr(self.retriever, "store", None)
            exists = bool(chats) or store is None or "messages" in store.versions()
        except Exception as exc:  # any failure to read the store is what health reports
            log.warning("the index cannot be read: %s", type(exc).__name__)
            return IndexReading(frozenset(), False, f"index: cannot be read ({type(exc).__name__})")
        return IndexReading(frozenset(chats), exists)

    async def current(self, pool: Executor, *, fresh: bool = False, wait_s: float | None = None) -> IndexReading:
        """The reading to answer with: read now when the store changed (or ``fresh``), the last one
        otherwise (read again in the background when older than ``refresh_s``). ``wait_s``: wait
        at most that long for a change's reading, then answer with the last one (when there is one)."""
        stamp = self._stamp_now()
        if self._reading is None or fresh or stamp != self._stamp:
            if wait_s is None or self._reading is None:
                return await self._refresh(pool, stamp)
            try:
                return await asyncio.wait_for(self._refresh(pool, stamp), wait_s)
            except TimeoutError:  # the reading goes on and settles; this answer is the last one
                return self._reading
        if time.monotonic() - self._read_at > self.refresh_s and self._pending is None:
            asyncio.ensure_future(self._refresh(pool, stamp))
        return self._reading

    def forget(self, chat: str) -> None:
        """``chat`` was forgotten on purpose: its rows are gone, not lost."""
        self._forgets += 1
        self.seen -= {chat}

    async def _refresh(self, pool: Executor, stamp: Any) -> IndexReading:
        if self._pending is None:
            loop = asyncio.get_running_loop()
            self._pending = asyncio.ensure_future(loop.run_in_executor(pool, self._read))
            forgets = self._forgets
            self._pending.add_done_callback(lambda done: self._settle(done, stamp, forgets))
        reading = await asyncio.shield(self._pending)
        return reading

    def _settle(self, done: asyncio.Future, stamp: Any, forgets: int) -> None:
        self._pending = None
        if done.cancelled() or done.exception() is not None:
            return
        self._reading, self._stamp, self._read_at = done.result(), stamp, time.monotonic()
        if forgets == self._forgets:
            self.seen |= self._reading.chats
