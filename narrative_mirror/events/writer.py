"""``EventLog``: the ``retrieval_events`` table next to the index (same uri) with a queued writer.

Logging never blocks or breaks answering: ``log`` / ``mark_cited`` only validate and enqueue;
one background writer thread batches the queue into LanceDB (so writes are serialized), and a
failed write is counted in ``failures`` and logged as a warning, never raised to the caller.
With an embedder the writer also links follow-ups (``follow_ups``) before it writes a batch.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
import pyarrow as pa

from narrative_mirror.events.follow_ups import FollowUpLinker
from narrative_mirror.events.record import EVENT_SCHEMA, RetrievalEvent, check_id, check_ids, check_unit
from narrative_mirror.events.table import TABLE, connect, quote, read_events, sql_time

if TYPE_CHECKING:
    from narrative_mirror.embedding import Embedder

log = logging.getLogger(__name__)


@dataclass
class _Log:
    row: dict


@dataclass
class _Cite:
    event_id: str
    cited_ids: list[str]
    confidence: float


_STOP = object()


class EventLog:
    """The ``retrieval_events`` table at ``uri`` with a background batching writer.

    ``retention_days``: ``prune()`` deletes older events (None keeps everything).
    ``embedder``: enables follow-up detection (None: no follow-up detection).
    ``storage_options``: LanceDB's object-store options for an ``s3://`` uri (as ``IndexStore``).
    """

    def __init__(
        self,
        uri: str | Path,
        retention_days: int | None = 90,
        *,
        embedder: Embedder | None = None,
        follow_up_window: timedelta = timedelta(minutes=10),
        follow_up_similarity: float = 0.7,
        max_pending: int = 10_000,
        batch_size: int = 256,
        storage_options: Mapping[str, str] | None = None,
    ):
        if retention_days is not None and (not isinstance(retention_days, int) or retention_days < 1):
            raise ValueError(f"EventLog: retention_days must be None or an int >= 1, got {retention_days!r}")
        if follow_up_window <= timedelta(0):
            raise ValueError(f"EventLog: follow_up_window must be positive, got {follow_up_window}")
        if not 0.0 < follow_up_similarity < 1.0:
            raise ValueError(f"EventLog: follow_up_similarity must be in (0, 1), got {follow_up_similarity}")
        self.uri = str(uri)
        self.storage_options = dict(storage_options) if storage_options else None
        self.retention_days = retention_days
        self.embedder = embedder
        self.follow_up_window = follow_up_window
        self.follow_up_similarity = follow_up_similarity
        self.batch_size = batch_size
        self._queue: queue.Queue = queue.Queue(maxsize=max_pending)
        self._write_lock = threading.Lock()  # every LanceDB write, from the writer or prune()
        self._count_lock = threading.Lock()
        self._state_lock = threading.Lock()  # nothing is queued behind the writer's stop marker
        self._failures = 0
        self._table = None
        self._follow_ups = (FollowUpLinker(embedder, follow_up_window, follow_up_similarity, self._open)
                            if embedder is not None else None)
        self._closed = False
        self._writer = threading.Thread(target=self._run, name="retrieval-event-writer", daemon=True)
        self._writer.start()
        atexit.register(self.close)

    # -- public API ----------------------------------------------------------------------------
    @property
    def failures(self) -> int:
        """Events or updates that could not be stored (queue full, write errors)."""
        return self._failures

    def log(self, event: RetrievalEvent) -> str:
        """Queue ``event`` for writing; returns its event id at once."""
        if not isinstance(event, RetrievalEvent):
            raise TypeError(f"EventLog.log: expected a RetrievalEvent, got {type(event).__name__}")
        self._put(_Log(event.row()), f"event {event.event_id}")
        return event.event_id

    def mark_cited(self, event_id: str, cited: Sequence[str], confidence: float) -> None:
        """Record which ids the answer cited (queued like ``log``)."""
        check_id(event_id, "event_id")
        check_ids(list(cited), "cited_ids")
        check_unit(confidence, "citation_confidence")
        self._put(_Cite(event_id, list(cited), float(confidence)), f"citations of {event_id}")

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until everything queued so far was written (or failed); False on timeout."""
        with self._queue.all_tasks_done:
            return self._queue.all_tasks_done.wait_for(lambda: self._queue.unfinished_tasks == 0, timeout)

    def close(self, timeout: float | None = 30.0) -> None:
        """Flush and stop the writer; later ``log`` calls count as failures."""
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._queue.put(_STOP, timeout=timeout)
        except queue.Full:
            log.warning("retrieval events: writer queue full at close")
        self._writer.join(timeout)

    def events(
        self,
        *,
        user_id: str | None = None,
        chat_file: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        flush: bool = True,
    ) -> pl.DataFrame:
        """Stored events (after flushing the queue), oldest first; filters combine with AND."""
        if flush and not self._closed:
            self.flush()
        return read_events(self.uri, user_id=user_id, chat_file=chat_file, since=since, until=until,
                           storage_options=self.storage_options)

    def prune(self, now: datetime | None = None) -> int:
        """Delete events older than ``retention_days``; returns how many were deleted."""
        if self.retention_days is None:
            return 0
        if not self._closed:
            self.flush()
        cutoff = (now or datetime.now(UTC)) - timedelta(days=self.retention_days)
        with self._write_lock:
            table = self._open()
            if table is None:
                return 0
            deleted = table.delete(f"created_at < {sql_time(cutoff)}").num_deleted_rows
            if deleted:
                table.optimize()  # compact the many small append fragments and drop old versions
        return deleted

    # -- writer --------------------------------------------------------------------------------
    def _fail(self, count: int, what: str, exc: BaseException | None = None) -> None:
        with self._count_lock:
            self._failures += count
        log.warning("retrieval events: could not store %s%s", what, f": {exc!r}" if exc else "")

    def _put(self, item: object, what: str) -> None:
        with self._state_lock:
            closed = self._closed
            if not closed:
                try:
                    self._queue.put_nowait(item)
                    return
                except queue.Full:
                    pass
        self._fail(1, what + (" (event log closed)" if closed else " (writer queue full)"))

    def _open(self):
        if self._table is None:
            try:
                self._table = connect(self.uri, self.storage_options).open_table(TABLE)
            except ValueError:  # lancedb: "Table '...' was not found"
                return None
        return self._table

    def _open_for_write(self):
        table = self._open()
        if table is None:
            db = connect(self.uri, self.storage_options)
            try:
                table = db.create_table(TABLE, schema=EVENT_SCHEMA)
            except ValueError as exc:  # another process created it meanwhile
                if "already exists" not in str(exc):
                    raise
                table = db.open_table(TABLE)
            self._table = table
        return table

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < self.batch_size:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                self._write([item for item in batch if item is not _STOP])
            except Exception as exc:  # never let the writer die: count and go on
                self._fail(len(batch), f"a batch of {len(batch)} items", exc)
            finally:
                for _ in batch:
                    self._queue.task_done()
            if any(item is _STOP for item in batch):
                return

    def _write(self, batch: list) -> None:
        rows = sorted((item.row for item in batch if isinstance(item, _Log)), key=lambda r: r["created_at"])
        pending = {row["event_id"]: row for row in rows}
        updates: dict[str, dict] = {}
        if self._follow_ups is not None and rows:
            try:
                self._follow_ups.link(rows, pending, updates)
            except Exception as exc:  # best effort: the events are still stored, without links
                log.warning("retrieval events: follow-up detection failed: %r", exc)
        for item in batch:
            if isinstance(item, _Cite):
                values = {"cited_ids": item.cited_ids, "citation_confidence": item.confidence}
                if item.event_id in pending:
                    pending[item.event_id].update(values)
                else:
                    updates.setdefault(item.event_id, {}).update(values)
        with self._write_lock:
            try:
                table = self._open_for_write()
                if rows:
                    table.add(pa.Table.from_pylist(rows, schema=EVENT_SCHEMA))
            except Exception as exc:
                self._fail(len(rows) + len(updates), f"{len(rows)} events and {len(updates)} updates", exc)
                return
            for event_id, values in updates.items():
                try:
                    if table.update(where=f"event_id = {quote(event_id)}", values=values).rows_updated == 0:
                        self._fail(1, f"an update of event {event_id} (no such event)")
                except Exception as exc:
                    self._fail(1, f"an update of event {event_id}", exc)
