"""``EventLog``: the ``retrieval_events`` table next to the index (same uri), written from a
durable spool by one background writer.

``log`` / ``mark_cited`` validate, append the item to the spool (``spool``: fsynced before they
return) and wake the writer; they never wait on the store. The writer stores the spool in
batches (linking follow-ups first, ``follow_ups``), and retries a batch the store refused until
it is accepted, reconnecting each time, so a store deleted and recreated under a running process
is written again without a restart. ``state()`` says whether the store is failing and why. A new
``EventLog`` first stores what a process that ended left in the spool folder (no duplicates:
events already in the table are skipped).
"""

from __future__ import annotations

import atexit
import logging
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
import pyarrow as pa

from narrative_mirror import settings
from narrative_mirror.events import spool as spooling
from narrative_mirror.events.follow_ups import FollowUpLinker
from narrative_mirror.events.record import (
    EVENT_SCHEMA,
    RetrievalEvent,
    check_confidences,
    check_id,
    check_ids,
    check_unit,
)
from narrative_mirror.events.table import TABLE, connect, delete_older, prepare, quote, read_events

if TYPE_CHECKING:
    from narrative_mirror.embedding import Embedder

log = logging.getLogger(__name__)

RETRY_S = (0.1, 0.5, 2.0, 5.0)  # waits between attempts at a batch the store refused
LIST_TYPES = {"cited_ids": "List(Utf8)", "cited_confidences": "List(Float64)"}  # DataFusion's names
# Writes through one table handle before it is opened anew: a LanceDB handle keeps what it read of
# every version it wrote (about 20 KB each), so a long-lived one grew with every event stored.
REOPEN_AFTER_WRITES = 50


@dataclass(frozen=True)
class EventLogState:
    """``status``: "ok", or "failing" while the last write was refused (``reason``, since
    ``failing_since``); ``failures``: items not stored at their first attempt since the log
    started; ``unstored``: events spooled and not in the table yet (kept until it accepts them)."""

    status: str
    reason: str | None
    failing_since: datetime | None
    failures: int
    unstored: int

    def problem(self) -> str | None:
        """One line for health while failing, else None."""
        if self.status == "ok":
            return None
        return (
            f"event log: the store refuses writes since {self.failing_since:%Y-%m-%dT%H:%M:%SZ} ({self.reason});"
            f" {self.unstored} event(s) kept in the spool until it accepts them"
        )


class EventLog:
    """The ``retrieval_events`` table at ``uri`` with a durable spool and a background writer.

    ``retention_days``: ``prune()`` deletes older events (None keeps everything).
    ``embedder``: enables follow-up detection (None: no follow-up detection); ``follow_up_recent``:
    the most earlier queries per user it compares with. ``spool_dir``: the spool folder (default:
    ``<uri>.spool`` beside a local index, a private temporary folder for a remote one).
    ``storage_options``: LanceDB's object-store options for an ``s3://`` uri (as ``IndexStore``).
    """

    def __init__(
        self,
        uri: str | Path,
        retention_days: int | None = None,
        *,
        embedder: Embedder | None = None,
        follow_up_window: timedelta = timedelta(minutes=10),
        follow_up_similarity: float = 0.7,
        follow_up_recent: int = 20,
        batch_size: int = 256,
        spool_dir: str | Path | None = None,
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
        self.batch_size = batch_size
        if spool_dir is None:
            spool_dir = (
                tempfile.mkdtemp(prefix="nm-event-spool-")
                if settings.is_remote_uri(self.uri)
                else f"{self.uri.removeprefix('file://').rstrip('/')}.spool"
            )
        self.spool_dir = Path(spool_dir)
        self._spool = spooling.Spool(self.spool_dir)
        self._cond = threading.Condition()  # guards the counters below; the writer waits on it
        self._write_lock = threading.Lock()  # every LanceDB write, from the writer or prune()
        self._tried = 0  # spool offset up to which every item was tried at least once
        self._orphans_tried = False  # what ended processes left was tried (at the start)
        self._stored_events = self._spooled_events = 0
        self._failures = 0
        self._failing: tuple[str, datetime] | None = None
        self._closed = self._stopping = False
        self._table = None
        self._prepared = None  # the table object ``prepare`` last ran on
        self._writes = 0  # writes through the current table handle (REOPEN_AFTER_WRITES)
        self._follow_ups = (
            FollowUpLinker(embedder, follow_up_window, follow_up_similarity, self._open, max_recent=follow_up_recent)
            if embedder is not None
            else None
        )
        self._writer = threading.Thread(target=self._run, name="retrieval-event-writer", daemon=True)
        self._writer.start()
        atexit.register(self.close)

    # -- public API ----------------------------------------------------------------------------
    @property
    def failures(self) -> int:
        """Events or updates that could not be stored at their first attempt, or after close."""
        return self._failures

    def state(self) -> EventLogState:
        with self._cond:
            reason, since = self._failing or (None, None)
            return EventLogState(
                "failing" if self._failing else "ok",
                reason,
                since,
                self._failures,
                self._spooled_events - self._stored_events,
            )

    def log(self, event: RetrievalEvent) -> str:
        """Spool ``event`` (durable when this returns); returns its event id."""
        if not isinstance(event, RetrievalEvent):
            raise TypeError(f"EventLog.log: expected a RetrievalEvent, got {type(event).__name__}")
        self._append(spooling.encode_event(event.row()), f"event {event.event_id}", events=1)
        return event.event_id

    def mark_cited(
        self,
        event_id: str,
        cited: Sequence[str],
        confidence: float | None = None,
        per_id: Sequence[float] | None = None,
    ) -> None:
        """Record which ids the answer cited (spooled like ``log``), with a confidence per cited id
        (``per_id``; default: ``confidence`` for each). The event's confidence is ``confidence``,
        else the mean of ``per_id``; citing nothing leaves it null."""
        check_id(event_id, "event_id")
        cited = list(dict.fromkeys(cited)) if isinstance(cited, list | tuple) else cited
        check_ids(cited, "cited_ids")
        check_unit(confidence, "citation_confidence")
        per_id = list(per_id) if per_id is not None else ([] if confidence is None else [confidence] * len(cited))
        check_confidences(per_id, cited)
        if confidence is None and per_id:
            confidence = sum(per_id) / len(per_id)
        if not cited:
            confidence, per_id = None, []
        self._append(
            spooling.encode_citation(
                event_id, cited, None if confidence is None else float(confidence), [float(c) for c in per_id]
            ),
            f"citations of {event_id}",
        )

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until everything spooled so far, and what ended processes left in the spool folder,
        was tried at least once (stored, or refused and kept for retries); False on timeout."""
        with self._cond:
            target = self._spool.end
            done = lambda: self._orphans_tried and self._tried >= target  # noqa: E731
            return self._cond.wait_for(lambda: done() or not self._writer.is_alive(), timeout) and done()

    def close(self, timeout: float | None = 30.0) -> None:
        """Store what is spooled (one more try if the store is failing) and stop the writer; what
        is still unstored stays in the spool for the next start. Later ``log`` calls count as failures."""
        with self._cond:
            if self._closed:
                return
            self._closed = self._stopping = True
            self._cond.notify_all()
        self._writer.join(timeout)
        if not self._writer.is_alive():
            self._spool.close()

    def events(
        self,
        *,
        user_id: str | None = None,
        chat_file: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        flush: bool = True,
    ) -> pl.DataFrame:
        """Stored events (after flushing the spool), oldest first; filters combine with AND."""
        if flush and not self._closed:
            self.flush()
        return read_events(
            self.uri,
            user_id=user_id,
            chat_file=chat_file,
            since=since,
            until=until,
            storage_options=self.storage_options,
        )

    def prune(self, now: datetime | None = None, days: int | None = None) -> int:
        """Delete events older than ``days`` (default ``retention_days``; None: keep all); returns
        how many were deleted."""
        days = self.retention_days if days is None else days
        if days is None:
            return 0
        if not self._closed:
            self.flush()
        cutoff = (now or datetime.now(UTC)) - timedelta(days=days)
        with self._write_lock:
            return delete_older(self.uri, cutoff, self.storage_options)

    # -- spool ---------------------------------------------------------------------------------
    def _fail(self, count: int, what: str, exc: BaseException | None = None) -> None:
        with self._cond:
            self._failures += count
        log.warning("retrieval events: could not store %s%s", what, f": {exc!r}" if exc else "")

    def _append(self, data: bytes, what: str, events: int = 0) -> None:
        if self._closed:
            self._fail(1, what + " (event log closed)")
            return
        try:
            self._spool.append(data)
        except OSError as exc:
            # Not durable; the caller still gets its answer, and health shows the failure.
            self._set_failing(f"spool {self.spool_dir}: {exc.strerror or exc}")
            self._fail(1, what + " (spool not writable)", exc)
            return
        with self._cond:
            self._spooled_events += events
            self._cond.notify_all()

    def _set_failing(self, reason: str | None) -> None:
        with self._cond:
            if reason is None:
                self._failing = None
            elif self._failing is None:
                self._failing = (reason, datetime.now(UTC))
            else:
                self._failing = (reason, self._failing[1])

    # -- writer --------------------------------------------------------------------------------
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
        if self._prepared is not table:
            prepare(table)  # older tables get the newer columns; the analysis indexes exist
            self._prepared = table
        return table

    def _run(self) -> None:
        self._store_orphans()
        with self._cond:
            self._orphans_tried = True
            self._cond.notify_all()
        offset = 0
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._spool.end > offset or self._stopping)
                if self._spool.end <= offset:
                    return
            after = self._store_from(offset)
            if after is None:
                return  # stopping while the store refuses: the spool keeps them for the next start
            self._spool.commit(after)
            offset = after

    def _read(self, offset: int, max_items: int) -> tuple[list[dict], list[dict], int]:
        lines, after = self._spool.read(offset, max_items)
        if not lines and after == offset and self._spool.end > offset:
            raise RuntimeError(f"unreadable spool {self._spool.path} at offset {offset}")
        rows, cites = self._batch([item for line in lines if (item := spooling.decode(line))], link=True)
        return rows, cites, after

    def _store_from(self, offset: int) -> int | None:
        """Store one batch from spool ``offset``, retrying until the store accepts it; while it
        refuses, newly spooled items join the batch (up to ``batch_size``) so each is tried once.
        Returns the offset after the batch, or None when stopping while the store refuses."""
        rows, cites, after = self._read(offset, self.batch_size)
        fresh = len(rows) + len(cites)  # items not tried yet
        attempt = 0
        while True:
            try:
                self._store(rows, cites, dedupe=attempt > 0)
            except Exception as exc:
                self._table = None  # reconnect next time: the store may have been deleted and recreated
                self._set_failing(" ".join(f"{type(exc).__name__}: {exc}".split())[:300])
                if fresh:
                    self._fail(fresh, f"{fresh} events or updates (kept; retrying)", exc)
                with self._cond:
                    self._tried = max(self._tried, after)
                    self._cond.notify_all()
                    if self._stopping and attempt > 0:
                        return None
                    self._cond.wait(RETRY_S[min(attempt, len(RETRY_S) - 1)])
                attempt += 1
                room = self.batch_size - len(rows) - len(cites)
                more_rows, more_cites, after = self._read(after, room) if room > 0 else ([], [], after)
                rows, cites, fresh = rows + more_rows, cites + more_cites, len(more_rows) + len(more_cites)
                continue
            self._set_failing(None)
            with self._cond:
                self._stored_events += len(rows)
                self._tried = max(self._tried, after)
                self._cond.notify_all()
            return after

    def _batch(self, items: list[tuple[str, dict]], link: bool) -> tuple[list[dict], list[dict]]:
        """Rows (oldest first, follow-ups linked when ``link``) and the citation updates of events
        not in them (those in them are merged into their rows)."""
        rows = sorted((item for kind, item in items if kind == "event"), key=lambda r: r["created_at"])
        pending = {row["event_id"]: row for row in rows}
        updates: dict[str, dict] = {}
        if link and self._follow_ups is not None and rows:
            try:
                self._follow_ups.link(rows, pending, updates)
            except Exception as exc:  # best effort: the events are still stored, without links
                log.warning("retrieval events: follow-up detection failed: %r", exc)
        for kind, item in items:
            if kind == "cite":
                values = {
                    "cited_ids": item["cited_ids"],
                    "citation_confidence": item["citation_confidence"],
                    "cited_confidences": item.get("cited_confidences") or [],
                }
                if item["event_id"] in pending:
                    pending[item["event_id"]].update(values)
                else:
                    updates.setdefault(item["event_id"], {}).update(values)
        return rows, [{"event_id": event_id, **values} for event_id, values in updates.items()]

    def _store(self, rows: list[dict], cites: list[dict], dedupe: bool) -> None:
        """Add ``rows`` (``dedupe``: those not in the table yet) and apply ``cites``; raises when
        the store refuses (nothing is counted as stored then)."""
        with self._write_lock:
            table = self._open_for_write()
            if rows and dedupe:
                ids = ", ".join(quote(row["event_id"]) for row in rows)
                stored = set(
                    table.search()
                    .where(f"event_id IN ({ids})")
                    .select(["event_id"])
                    .limit(None)
                    .to_arrow()
                    .column("event_id")
                    .to_pylist()
                )
                rows = [row for row in rows if row["event_id"] not in stored]
            if rows:
                table.add(pa.Table.from_pylist(rows, schema=EVENT_SCHEMA))
            for cite in cites:
                where = f"event_id = {quote(cite['event_id'])}"
                values = {k: v for k, v in cite.items() if k != "event_id" and v != []}
                if table.update(where=where, values=values).rows_updated == 0:
                    self._fail(1, f"an update of event {cite['event_id']} (no such event)")
                    continue
                # LanceDB cannot take an empty list as a value: cast an empty array instead
                empty = {k: f"arrow_cast(make_array(), '{LIST_TYPES[k]}')" for k, v in cite.items() if v == []}
                if empty:
                    table.update(where=where, values_sql=empty)
            self._writes += bool(rows) + len(cites)
            if self._writes >= REOPEN_AFTER_WRITES:
                self._table, self._writes = None, 0

    def _store_orphans(self) -> None:
        """Store what ended processes left in the spool folder (once, at the start)."""
        for orphan in spooling.orphans(self.spool_dir):
            try:
                rows, cites = self._batch(orphan.items(), link=False)
                self._store(rows, cites, dedupe=True)
            except Exception as exc:  # left for a later start; this log's own events go on
                self._table = None
                orphan.release()
                log.warning(
                    "retrieval events: could not store the spool %s left by an ended process: %r", orphan.path, exc
                )
                continue
            orphan.remove()
            log.info("retrieval events: stored %d events and %d updates left in %s", len(rows), len(cites), orphan.path)
