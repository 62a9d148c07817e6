"""Retrieval events (seed 001): what every retrieval returned, what the answer cited, and
whether the user had to ask again, kept as training data for later optimisation.

``EventLog`` keeps the LanceDB table ``retrieval_events`` next to the index (same uri).
Logging never blocks or breaks answering: ``log`` / ``mark_cited`` only validate and enqueue;
one background writer thread batches the queue into LanceDB (so writes are serialized), and a
failed write is counted in ``failures`` and logged as a warning, never raised to the caller.

Follow-up detection runs in the writer too: a query whose embedding has cosine > 0.7 with an
earlier query of the SAME user within the window (default 10 minutes) gets ``follow_up_of`` =
the most recent such event, and that earlier event is marked ``satisfied = False``. Earlier
queries come from memory, or from the table for a user this process has not seen yet (a CLI
run per question still links follow-ups).
"""

from __future__ import annotations

import atexit
import json
import logging
import math
import os
import queue
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import lancedb
import numpy as np
import polars as pl
import pyarrow as pa

if TYPE_CHECKING:
    from narrative_mirror.embedding import Embedder

log = logging.getLogger(__name__)

TABLE = "retrieval_events"
METHODS = ("semantic", "keyword", "hybrid", "tree", "pinned")
# Retriever variant -> event method.
VARIANT_METHODS = {
    "bm25": "keyword",
    "dense": "semantic",
    "hybrid": "hybrid",
    "hybrid_learned": "hybrid",
    "hybrid_expand": "hybrid",
    "hybrid_expand_rerank": "hybrid",
    "dual_path": "tree",
}
MAX_ID_CHARS = 200

EVENT_SCHEMA = pa.schema(
    [
        ("event_id", pa.string()),
        ("user_id", pa.string()),
        ("session_id", pa.string()),
        ("chat_file", pa.string()),
        ("query", pa.string()),
        ("returned_ids", pa.list_(pa.string())),
        ("method", pa.string()),
        ("threshold", pa.float64()),
        ("counts_per_source", pa.string()),  # JSON object: source -> count
        ("cited_ids", pa.list_(pa.string())),
        ("citation_confidence", pa.float64()),  # null until citations are known
        ("follow_up_of", pa.string()),
        ("satisfied", pa.bool_()),  # null = unknown, False = the user asked again
        ("latency_ms", pa.float64()),
        ("tokens_in_context", pa.int64()),
        ("created_at", pa.timestamp("us", tz="UTC")),
    ]
)


def approx_tokens(texts: Sequence[str]) -> int:
    """Rough token count of texts put in context: ~4 characters per token (English)."""
    return sum(math.ceil(len(t) / 4) for t in texts)


def _check_id(value: object, name: str, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str) or not value or len(value) > MAX_ID_CHARS:
        raise ValueError(f"retrieval event: {name} must be a non-empty string of <= {MAX_ID_CHARS} chars, got {value!r}")


def _check_ids(values: object, name: str) -> None:
    if not isinstance(values, list | tuple) or not all(isinstance(v, str) for v in values):
        raise ValueError(f"retrieval event: {name} must be a list of strings, got {values!r}")


def _check_unit(value: object, name: str) -> None:
    if value is not None and not (isinstance(value, int | float) and 0.0 <= value <= 1.0):
        raise ValueError(f"retrieval event: {name} must be null or in [0, 1], got {value!r}")


@dataclass
class RetrievalEvent:
    """One retrieval. ``cited_ids`` / ``citation_confidence`` may be filled later (``mark_cited``)."""

    user_id: str
    chat_file: str
    query: str
    returned_ids: list[str]
    method: str
    session_id: str | None = None
    threshold: float | None = None
    counts_per_source: dict[str, int] = field(default_factory=dict)
    cited_ids: list[str] = field(default_factory=list)
    citation_confidence: float | None = None
    follow_up_of: str | None = None  # set by follow-up detection unless given
    latency_ms: float = 0.0
    tokens_in_context: int = 0
    event_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def __post_init__(self) -> None:
        _check_id(self.user_id, "user_id")
        _check_id(self.session_id, "session_id", optional=True)
        _check_id(self.chat_file, "chat_file")
        _check_id(self.event_id, "event_id")
        _check_id(self.follow_up_of, "follow_up_of", optional=True)
        if not isinstance(self.query, str):
            raise ValueError(f"retrieval event: query must be a string, got {type(self.query).__name__}")
        _check_ids(self.returned_ids, "returned_ids")
        _check_ids(self.cited_ids, "cited_ids")
        if self.method not in METHODS:
            raise ValueError(f"retrieval event: method {self.method!r} not in {list(METHODS)}")
        if self.threshold is not None and not (isinstance(self.threshold, int | float) and math.isfinite(self.threshold)):
            raise ValueError(f"retrieval event: threshold must be null or a finite number, got {self.threshold!r}")
        if not isinstance(self.counts_per_source, Mapping) or not all(
            isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in self.counts_per_source.items()
        ):
            raise ValueError(f"retrieval event: counts_per_source must map names to counts >= 0, got {self.counts_per_source!r}")
        _check_unit(self.citation_confidence, "citation_confidence")
        if not isinstance(self.latency_ms, int | float) or not self.latency_ms >= 0:
            raise ValueError(f"retrieval event: latency_ms must be >= 0, got {self.latency_ms!r}")
        if not isinstance(self.tokens_in_context, int) or self.tokens_in_context < 0:
            raise ValueError(f"retrieval event: tokens_in_context must be an int >= 0, got {self.tokens_in_context!r}")
        if not isinstance(self.created_at, datetime) or self.created_at.tzinfo is None:
            raise ValueError(f"retrieval event: created_at must be a timezone-aware datetime, got {self.created_at!r}")

    def row(self) -> dict:
        return {
            "event_id": self.event_id,
            "user_id": self.user_id,
            "session_id": self.session_id,
            "chat_file": self.chat_file,
            "query": self.query,
            "returned_ids": list(self.returned_ids),
            "method": self.method,
            "threshold": None if self.threshold is None else float(self.threshold),
            "counts_per_source": json.dumps(dict(self.counts_per_source), sort_keys=True),
            "cited_ids": list(self.cited_ids),
            "citation_confidence": None if self.citation_confidence is None else float(self.citation_confidence),
            "follow_up_of": self.follow_up_of,
            "satisfied": None,
            "latency_ms": float(self.latency_ms),
            "tokens_in_context": self.tokens_in_context,
            "created_at": self.created_at.astimezone(UTC),
        }


def _quote(value: str) -> str:
    """A SQL string literal (LanceDB filters): quotes doubled."""
    return "'" + value.replace("'", "''") + "'"


def _sql_time(moment: datetime) -> str:
    return f"timestamp '{moment.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%S.%fZ')}'"


def _connect(uri: str, storage_options: Mapping[str, str] | None = None):
    # Always read the latest version: another process (CLI, Dagster) may append too.
    return lancedb.connect(uri, read_consistency_interval=timedelta(0),
                           storage_options=dict(storage_options) if storage_options else None)


def read_events(
    uri: str | Path,
    *,
    user_id: str | None = None,
    chat_file: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> pl.DataFrame:
    """The stored events at ``uri``, oldest first (empty if none yet); filters combine with AND.
    Read-only: for analysis jobs that do not log. ``storage_options``: as for ``EventLog``."""
    try:
        table = _connect(str(uri), storage_options).open_table(TABLE)
    except ValueError:  # lancedb: "Table '...' was not found"
        return pl.from_arrow(EVENT_SCHEMA.empty_table())
    clauses = []
    if user_id is not None:
        clauses.append(f"user_id = {_quote(user_id)}")
    if chat_file is not None:
        clauses.append(f"chat_file = {_quote(chat_file)}")
    if since is not None:
        clauses.append(f"created_at >= {_sql_time(since)}")
    if until is not None:
        clauses.append(f"created_at < {_sql_time(until)}")
    query = table.search()
    if clauses:
        query = query.where(" AND ".join(clauses))
    rows = query.select(EVENT_SCHEMA.names).limit(None).to_arrow()
    return pl.from_arrow(rows).sort("created_at", "event_id")


@dataclass
class _Log:
    row: dict


@dataclass
class _Cite:
    event_id: str
    cited_ids: list[str]
    confidence: float


_STOP = object()


@dataclass
class _Recent:
    event_id: str
    created_at: datetime
    vector: np.ndarray


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
        self._recent: dict[str, list[_Recent]] = {}
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
        _check_id(event_id, "event_id")
        _check_ids(list(cited), "cited_ids")
        _check_unit(confidence, "citation_confidence")
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
            deleted = table.delete(f"created_at < {_sql_time(cutoff)}").num_deleted_rows
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
                self._table = _connect(self.uri, self.storage_options).open_table(TABLE)
            except ValueError:  # lancedb: "Table '...' was not found"
                return None
        return self._table

    def _open_for_write(self):
        table = self._open()
        if table is None:
            db = _connect(self.uri, self.storage_options)
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
        if self.embedder is not None and rows:
            try:
                self._link_follow_ups(rows, pending, updates)
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
                    if table.update(where=f"event_id = {_quote(event_id)}", values=values).rows_updated == 0:
                        self._fail(1, f"an update of event {event_id} (no such event)")
                except Exception as exc:
                    self._fail(1, f"an update of event {event_id}", exc)

    def _link_follow_ups(self, rows: list[dict], pending: dict[str, dict], updates: dict[str, dict]) -> None:
        vectors = self.embedder.encode([row["query"] for row in rows])
        newest = rows[-1]["created_at"]
        # Users idle for longer than the window have nothing left to follow up.
        self._recent = {
            user: recent for user, recent in self._recent.items()
            if recent and newest - recent[-1].created_at <= self.follow_up_window
        }
        for row, vector in zip(rows, vectors):
            user, now = row["user_id"], row["created_at"]
            if user not in self._recent:
                self._recent[user] = self._stored_recent(user, now)
            recent = [r for r in self._recent[user] if timedelta(0) <= now - r.created_at <= self.follow_up_window]
            if row["follow_up_of"] is None:
                for earlier in reversed(recent):
                    if float(np.dot(earlier.vector, vector)) > self.follow_up_similarity:
                        row["follow_up_of"] = earlier.event_id
                        break
            earlier_id = row["follow_up_of"]
            if earlier_id is not None:
                if earlier_id in pending:
                    pending[earlier_id]["satisfied"] = False
                else:
                    updates.setdefault(earlier_id, {})["satisfied"] = False
            recent.append(_Recent(row["event_id"], now, vector))
            self._recent[user] = recent

    def _stored_recent(self, user_id: str, now: datetime) -> list[_Recent]:
        """The user's stored events of the window before ``now``, oldest first, with vectors."""
        try:
            table = self._open()
            rows = [] if table is None else (
                table.search()
                .where(f"user_id = {_quote(user_id)} AND created_at >= {_sql_time(now - self.follow_up_window)}"
                       f" AND created_at <= {_sql_time(now)}")
                .select(["event_id", "query", "created_at"])
                .limit(None)
                .to_arrow()
                .to_pylist()
            )
        except Exception as exc:  # an unreadable store must not stop this batch being written
            log.warning("retrieval events: cannot read earlier events of %r: %r", user_id, exc)
            return []
        if not rows:
            return []
        rows.sort(key=lambda r: r["created_at"])
        vectors = self.embedder.encode([r["query"] for r in rows])
        return [_Recent(r["event_id"], r["created_at"], v) for r, v in zip(rows, vectors)]


# -- analysis -------------------------------------------------------------------------------------
def _cited_counts(events: pl.DataFrame) -> pl.DataFrame:
    """Per event with known citations: returned, cited-and-returned and cited-not-returned counts."""
    known = events.filter(pl.col("citation_confidence").is_not_null())
    return known.select(
        pl.col("returned_ids").list.len().alias("returned"),
        pl.col("cited_ids").list.set_intersection("returned_ids").list.len().alias("cited"),
        pl.col("cited_ids").list.set_difference("returned_ids").list.len().alias("missed"),
    )


def _stats(events: pl.DataFrame) -> dict:
    n = events.height
    counts = _cited_counts(events)
    returned = int(counts["returned"].sum()) if counts.height else 0
    latency = events["latency_ms"].to_numpy()
    return {
        "events": n,
        "events_with_citations": counts.height,
        "returned": returned,
        "cited": int(counts["cited"].sum()) if counts.height else 0,
        "cited_not_returned": int(counts["missed"].sum()) if counts.height else 0,
        # share of returned messages the answers cited (events with known citations only)
        "cited_rate": (int(counts["cited"].sum()) / returned) if returned else None,
        # share of events the same user followed up with a similar query
        "follow_up_rate": (int(events["satisfied"].eq(False).sum()) / n) if n else None,
        "latency_ms_avg": float(latency.mean()) if n else None,
        "latency_ms_p95": float(np.percentile(latency, 95)) if n else None,  # linear interpolation
    }


def event_stats(events: pl.DataFrame) -> dict:
    """Seed-001 success queries over ``EventLog.events()``: cited share of returned messages,
    follow-up rate, average and p95 latency, overall and under ``per_method``."""
    missing = [c for c in ("returned_ids", "cited_ids", "citation_confidence", "satisfied", "latency_ms", "method")
               if c not in events.columns]
    if missing:
        raise ValueError(f"event_stats: events frame lacks columns {missing}")
    per_method = {
        method: _stats(events.filter(pl.col("method") == method))
        for method in sorted(events["method"].unique().to_list())
    }
    return {**_stats(events), "per_method": per_method}


def follow_ups_by_query(events: pl.DataFrame, limit: int = 20) -> pl.DataFrame:
    """Per query: how often it was asked and how often the same user asked again right after
    (a follow-up: the answer did not settle it), most followed-up first."""
    if not events.height:
        return pl.DataFrame(schema={"query": pl.String, "asked": pl.UInt32, "followed_up": pl.UInt32})
    return (events.group_by("query")
            .agg(pl.len().alias("asked"), pl.col("satisfied").eq(False).sum().cast(pl.UInt32).alias("followed_up"))
            .filter(pl.col("followed_up") > 0)
            .sort(["followed_up", "asked", "query"], descending=[True, True, False]).head(limit))


def export_training_examples(events: pl.DataFrame, path: str | Path) -> int:
    """Write one JSON line per event with known citations:
    {event_id, chat_file, query, returned, cited, not_cited, citation_confidence, satisfied,
    follow_up_of}; ``cited`` / ``not_cited`` split the returned ids (returned order).
    Returns the number of lines."""
    missing = [c for c in ("event_id", "chat_file", "query", "returned_ids", "cited_ids", "citation_confidence", "satisfied")
               if c not in events.columns]
    if missing:
        raise ValueError(f"export_training_examples: events frame lacks columns {missing}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    known = events.filter(pl.col("citation_confidence").is_not_null())
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as out:
        for row in known.iter_rows(named=True):
            cited = set(row["cited_ids"])
            out.write(json.dumps({
                "event_id": row["event_id"],
                "chat_file": row["chat_file"],
                "query": row["query"],
                "returned": row["returned_ids"],
                "cited": [i for i in row["returned_ids"] if i in cited],
                "not_cited": [i for i in row["returned_ids"] if i not in cited],
                "citation_confidence": row["citation_confidence"],
                "satisfied": row["satisfied"],
                "follow_up_of": row.get("follow_up_of"),
            }, ensure_ascii=False) + "\n")
    os.replace(tmp, path)  # readers never see a half-written file
    return known.height
