"""The stored ``retrieval_events`` table: connecting to it (always at its newest version), SQL
literals for its filters, and ``read_events`` for analysis jobs that do not log.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pyarrow as pa

from narrative_mirror.events.record import ADDED_COLUMNS, EVENT_SCHEMA

TABLE = "retrieval_events"
INDEXED = ("user_id", "created_at")  # the retrieval-events design: the analysis queries filter by user and by time


def quote(value: str) -> str:
    """A SQL string literal (LanceDB filters): quotes doubled."""
    return "'" + value.replace("'", "''") + "'"


def sql_time(moment: datetime) -> str:
    return f"timestamp '{moment.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%S.%fZ')}'"


def connect(uri: str, storage_options: Mapping[str, str] | None = None):
    # Always read the latest version: another process (CLI, Dagster) may append too. lancedb is
    # imported here, not by every process loading the definitions (index_store._lancedb).
    import lancedb

    return lancedb.connect(
        uri, read_consistency_interval=timedelta(0), storage_options=dict(storage_options) if storage_options else None
    )


def prepare(table) -> None:
    """Bring a stored table up to ``EVENT_SCHEMA`` (columns added since it was written arrive all
    null) and give it B-tree indexes on ``INDEXED``; idempotent."""
    missing = [EVENT_SCHEMA.field(name) for name in ADDED_COLUMNS if name not in table.schema.names]
    if missing:
        table.add_columns(pa.schema(missing))
    indexed = {column for index in table.list_indices() for column in index.columns}
    from lancedb.index import BTree

    for column in INDEXED:
        if column not in indexed:
            table.create_index(column, config=BTree())


def _with_all_columns(rows: pa.Table) -> pa.Table:
    """``rows`` of an older table, its missing columns null."""
    for name in EVENT_SCHEMA.names:
        if name not in rows.column_names:
            rows = rows.append_column(EVENT_SCHEMA.field(name), pa.nulls(rows.num_rows, EVENT_SCHEMA.field(name).type))
    return rows.select(EVENT_SCHEMA.names)


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
        table = connect(str(uri), storage_options).open_table(TABLE)
    except ValueError:  # lancedb: "Table '...' was not found"
        return pl.from_arrow(EVENT_SCHEMA.empty_table())
    clauses = []
    if user_id is not None:
        clauses.append(f"user_id = {quote(user_id)}")
    if chat_file is not None:
        clauses.append(f"chat_file = {quote(chat_file)}")
    if since is not None:
        clauses.append(f"created_at >= {sql_time(since)}")
    if until is not None:
        clauses.append(f"created_at < {sql_time(until)}")
    query = table.search()
    if clauses:
        query = query.where(" AND ".join(clauses))
    stored = [name for name in EVENT_SCHEMA.names if name in table.schema.names]
    rows = _with_all_columns(query.select(stored).limit(None).to_arrow())
    return pl.from_arrow(rows).sort("created_at", "event_id")


def delete_older(uri: str | Path, cutoff: datetime, storage_options: Mapping[str, str] | None = None) -> int:
    """Delete the stored events created before ``cutoff``; returns how many (0 without a table).
    Safe beside a writing ``EventLog``: LanceDB commits concurrent appends and deletes in turn."""
    try:
        table = connect(str(uri), storage_options).open_table(TABLE)
    except ValueError:  # lancedb: "Table '...' was not found"
        return 0
    deleted = table.delete(f"created_at < {sql_time(cutoff)}").num_deleted_rows
    if deleted:
        table.optimize()  # compact the many small append fragments and drop old versions
    return deleted


def find_event(uri: str | Path, event_id: str, storage_options: Mapping[str, str] | None = None) -> dict | None:
    """The stored event ``event_id`` (its user and chat), or None."""
    try:
        table = connect(str(uri), storage_options).open_table(TABLE)
    except ValueError:  # lancedb: "Table '...' was not found"
        return None
    rows = (
        table.search()
        .where(f"event_id = {quote(event_id)}")
        .select(["event_id", "user_id", "chat_file"])
        .limit(1)
        .to_arrow()
        .to_pylist()
    )
    return rows[0] if rows else None
