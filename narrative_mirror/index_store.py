"""LanceDB store of the searchable layers: messages (L0 + L1.5 signals), blocks (L1), threads (L2);
their rows are built by ``index_rows``.

One table per layer holds every chat file; a chat's rows are replaced in one commit
(``replace_partition``), so re-indexing one chat never touches another's rows and a failed
write leaves the previous rows in place. A write costs what the chat's rows cost: each table's
native full-text index on ``text`` is created with the table and brought up to date by
``maintain`` (rows written since are searched without it meanwhile), which also compacts the
small files every write leaves and removes old versions: a maintenance job, not a per-write
cost.

Several processes (workers of a distributed run, on one machine or many) may write different
chats to one table at once: LanceDB commits optimistically, and a commit that lost the race
(``Retryable commit conflict``, also from compaction meeting a write) is redone against the
newest version (``COMMIT_ATTEMPTS``). Redoing a whole per-chat replace is idempotent, so nothing
is lost or written twice. Tables are created empty (rows only arrive by merge), and a create
that lost a race and landed over another writer's table puts back what it dropped. The database
may live on object storage (``s3://bucket/prefix``) with ``storage_options`` (endpoint, keys,
region); without them LanceDB reads the standard AWS_* variables itself.

What a chat's memory needs from the store can be checked (``chat_rows``: one count per table;
``table_problem``: every row read); a connection that failed is opened anew on the next use.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TypeVar

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from narrative_mirror.index_rows import block_schema, columns_added, message_schema, thread_schema

TABLES = ("messages", "blocks", "threads")
ID_COLUMNS = {"messages": "message_id", "blocks": "block_id", "threads": "thread_id"}

# A chat file name ends up quoted inside a filter string: no quotes, backslashes or controls.
_CHAT_FILE_RE = re.compile(r"^[^'\"\\\x00-\x1f]+$")

# Commit conflicts: how often a write is redone, and the first wait (doubling, with jitter, capped).
COMMIT_ATTEMPTS = 8
COMMIT_RETRY_WAIT_S = 0.2
COMMIT_RETRY_MAX_WAIT_S = 5.0
_CONFLICT_RE = re.compile(
    r"commit conflict|retryable|preempted by concurrent|too many concurrent writers|incompatible transaction", re.I
)
_T = TypeVar("_T")


def validate_chat_file(chat_file: str) -> str:
    if not isinstance(chat_file, str) or not _CHAT_FILE_RE.match(chat_file):
        raise ValueError(
            f"chat_file {chat_file!r}: must be non-empty, without quotes, backslashes or control characters"
        )
    return chat_file


def _schema_difference(expected: pa.Schema, got: pa.Schema) -> str:
    for field in expected:
        if field.name not in got.names:
            return f"missing column {field.name!r}"
        if not got.field(field.name).type.equals(field.type):
            return f"column {field.name!r} is {got.field(field.name).type}, the table has {field.type}"
    extra = [n for n in got.names if n not in expected.names]
    return f"unexpected columns {extra}" if extra else "columns in a different order"


def is_commit_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` is LanceDB saying another writer committed first (worth redoing)."""
    return isinstance(exc, (RuntimeError, OSError, ValueError)) and bool(_CONFLICT_RE.search(str(exc)))


def retry_commit_conflicts(write: Callable[[], _T], attempts: int | None = None) -> _T:
    """Run ``write`` (which must start from the table's newest version, i.e. open it itself)
    again while it fails with a commit conflict, up to ``attempts`` times in all."""
    attempts = attempts or COMMIT_ATTEMPTS
    for attempt in range(1, attempts + 1):
        try:
            return write()
        except Exception as exc:
            if attempt == attempts or not is_commit_conflict(exc):
                raise
            wait = min(COMMIT_RETRY_MAX_WAIT_S, COMMIT_RETRY_WAIT_S * 2 ** (attempt - 1))
            time.sleep(wait * random.uniform(0.5, 1.0))
    raise AssertionError("unreachable")


def _text_index(tbl) -> str | None:
    """Name of the table's full-text index on ``text``, None when it has none."""
    return next((i.name for i in tbl.list_indices() if i.columns == ["text"]), None)


def _lancedb():
    """lancedb, imported when a store is opened: its import takes about 2 s of CPU (most of it its
    REST namespace client), which every process loading the Dagster definitions (webserver, code
    server, daemon, each step) would pay without ever opening a store."""
    import lancedb

    return lancedb


def _full_text_index():
    from lancedb.index import FTS

    return FTS()


def _ensure_text_index(tbl) -> None:
    if _text_index(tbl) is None:
        tbl.create_index("text", config=_full_text_index(), replace=True)


class IndexStore:
    """The LanceDB database at ``uri`` holding the ``messages``, ``blocks`` and ``threads`` tables.

    ``uri``: a folder, or object storage (``s3://bucket/prefix``); ``storage_options``: LanceDB's
    object-store options for it (``aws_endpoint``, ``aws_region``, ``aws_access_key_id``,
    ``aws_secret_access_key``, ``allow_http``), None = its defaults (the AWS_* variables).
    """

    def __init__(self, uri: str, storage_options: Mapping[str, str] | None = None):
        self.uri = str(uri)
        self.storage_options = dict(storage_options) if storage_options else None
        self._db = _lancedb().connect(self.uri, storage_options=self.storage_options)

    def _open(self, table: str):
        if table not in TABLES:
            raise ValueError(f"unknown table {table!r}; known: {list(TABLES)}")
        try:
            return self._db.open_table(table)
        except ValueError as exc:
            if "not found" in str(exc):  # lancedb: "Table '...' was not found"
                return None
            failure: Exception = exc
        except (OSError, RuntimeError) as exc:
            failure = exc
        # The connection itself failed (its folder was removed and made again, a dropped
        # network store): open it anew once, so that a store that works again is used again.
        self.reopen()
        try:
            return self._db.open_table(table)
        except ValueError as exc:
            if "not found" in str(exc):
                return None
            raise exc from failure

    def reopen(self) -> None:
        """A new connection to the database (what was cached by the old one is dropped)."""
        self._db = _lancedb().connect(self.uri, storage_options=self.storage_options)

    # -- integrity -----------------------------------------------------------------------------
    def chat_rows(self, chat_file: str) -> dict[str, int]:
        """Rows of ``chat_file`` per table (0 where the table does not exist), one count query
        per table. A table whose files cannot be read raises (RuntimeError/OSError from LanceDB)."""
        return {name: self.chat_row_count(name, chat_file) for name in TABLES}

    def rows_per_chat(self, table: str) -> dict[str, int]:
        """Rows of each chat file in ``table`` ({} when it does not exist): one read of its
        ``chat_file`` column. A table whose files cannot be read raises."""
        rows = self._read(table, None, ["chat_file"])
        if rows is None:
            return {}
        counts = pc.value_counts(rows.column("chat_file")).to_pylist()
        return {c["values"]: c["counts"] for c in counts}

    def chat_row_count(self, table: str, chat_file: str) -> int:
        tbl = self._open(table)
        return tbl.count_rows(f"chat_file = '{validate_chat_file(chat_file)}'") if tbl is not None else 0

    def table_problem(self, table: str) -> str | None:
        """What is wrong with ``table`` when all its rows are read (None: nothing, or no table):
        the full check of ``build --repair``."""
        try:
            tbl = self._open(table)
            if tbl is None:
                return None
            tbl.search().select(["chat_file", ID_COLUMNS[table]]).limit(None).to_arrow()
            tbl.to_arrow()
        except (RuntimeError, OSError, ValueError) as exc:
            return f"unreadable ({' '.join(str(exc).split())[:200]})"
        return None

    def drop(self, table: str) -> None:
        """Remove ``table`` (one whose files are damaged): its chats are written again afterwards."""
        if table not in TABLES:
            raise ValueError(f"unknown table {table!r}; known: {list(TABLES)}")
        try:
            self._db.drop_table(table)
        except ValueError as exc:
            if "not found" not in str(exc):
                raise
        self.reopen()

    def missing_text_indexes(self) -> list[str]:
        """Existing tables without their full-text index on ``text``."""
        return [name for name in TABLES if (tbl := self._open(name)) is not None and _text_index(tbl) is None]

    def ensure_text_index(self, table: str) -> None:
        retry_commit_conflicts(lambda: _ensure_text_index(self._db.open_table(table)))

    def replace_partition(self, table: str, chat_file: str, rows: pa.Table) -> int:
        """Make ``rows`` the whole content of ``chat_file`` in ``table`` in one commit.

        Rows of other chat files are untouched; on any error the previous rows stay as they were.
        Returns the table version after the write.
        """
        validate_chat_file(chat_file)
        tbl = self._open(table)
        id_col = ID_COLUMNS[table]
        if id_col not in rows.column_names or "chat_file" not in rows.column_names:
            raise ValueError(f"{table} rows for {chat_file}: need columns {id_col!r} and 'chat_file'")
        others = set(rows.column("chat_file").to_pylist()) - {chat_file}
        if others:
            raise ValueError(f"{table} rows for {chat_file}: rows of other chat files {sorted(others)}")
        created = tbl is None and self._create(table, rows.schema)
        if tbl is None:
            tbl = self._db.open_table(table)
        tbl = self._add_new_columns(table, tbl, rows.schema)
        if not rows.schema.equals(tbl.schema):
            raise ValueError(
                f"{table} rows for {chat_file}: schema differs from the table's "
                f"({_schema_difference(tbl.schema, rows.schema)}); a changed embedder needs a fresh "
                f"store at {self.uri}"
            )

        def merge() -> int:
            # From the newest version each time: a retried merge replaces the chat's rows again.
            current = self._db.open_table(table)
            result = (
                current.merge_insert(id_col)
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .when_not_matched_by_source_delete(f"chat_file = '{chat_file}'")
                .execute(rows)
            )
            return getattr(result, "version", None) or current.version

        try:
            version = retry_commit_conflicts(merge)
        except (ValueError, OSError, RuntimeError) as exc:
            raise ValueError(f"{table} rows for {chat_file}: write failed, previous rows kept: {exc}") from exc
        if created:
            # The table's first rows come with its full-text index, as when a table is made in one piece.
            retry_commit_conflicts(
                lambda: self._db.open_table(table).create_index("text", config=_full_text_index(), replace=True)
            )
            version = self._db.open_table(table).version
        return version

    def add_rows(self, table: str, chat_file: str, rows: pa.Table) -> int:
        """Insert ``rows`` of ``chat_file`` whose ids the table lacks, keeping every other row (a
        live chat's new messages); redoing it adds nothing. Returns the table version after it."""
        validate_chat_file(chat_file)
        if set(rows.column("chat_file").to_pylist()) - {chat_file}:
            raise ValueError(f"{table} rows for {chat_file}: rows of other chat files")
        if (tbl := self._open(table)) is None:
            self._create(table, rows.schema)
        else:
            self._add_new_columns(table, tbl, rows.schema)

        def insert() -> int:
            current = self._db.open_table(table)
            result = current.merge_insert(ID_COLUMNS[table]).when_not_matched_insert_all().execute(rows)
            return getattr(result, "version", None) or current.version

        return retry_commit_conflicts(insert)

    def _add_new_columns(self, table: str, tbl, rows: pa.Schema):
        """A table written before columns ``rows`` have (index_rows.columns_added) gets them, null
        in its rows until each chat is written again; returns the table as it is now."""
        if not columns_added(tbl.schema, rows):
            return tbl

        def add() -> None:  # from the newest version: another writer may have added them first
            current = self._db.open_table(table)
            if missing := columns_added(current.schema, rows):
                current.add_columns(missing)

        retry_commit_conflicts(add)
        return self._db.open_table(table)

    def delete_rows(self, table: str, chat_file: str, ids: list[str]) -> int:
        """Delete the rows of ``chat_file`` with these ids (a forgotten live message); returns how
        many were there. Their bytes stay in old versions until ``maintain`` removes those."""
        validate_chat_file(chat_file)
        tbl = self._open(table)
        if tbl is None or not ids:
            return 0
        quoted = ", ".join("'" + validate_chat_file(i) + "'" for i in ids)
        where = f"chat_file = '{chat_file}' AND {ID_COLUMNS[table]} IN ({quoted})"
        found = tbl.count_rows(where)
        if found:
            retry_commit_conflicts(lambda: self._db.open_table(table).delete(where))
        return found

    def delete_chat(self, table: str, chat_file: str) -> int:
        """Delete every row of ``chat_file`` in ``table`` (a forgotten chat, or layers that
        quoted a forgotten message); returns how many. Old versions keep them until ``maintain``."""
        validate_chat_file(chat_file)
        tbl = self._open(table)
        if tbl is None:
            return 0
        where = f"chat_file = '{chat_file}'"
        found = tbl.count_rows(where)
        if found:
            retry_commit_conflicts(lambda: self._db.open_table(table).delete(where))
        return found

    def read_columns(self, table: str, columns: list[str]) -> pa.Table | None:
        """``columns`` of every row of ``table`` (None when it does not exist)."""
        return self._read(table, None, columns)

    def _create(self, table: str, schema: pa.Schema) -> bool:
        """Create ``table`` empty, with its full-text index: rows only ever arrive by merge.
        Returns whether this call created it (False: another writer did).

        Writers that find the table missing at the same moment all create it. LanceDB commits
        the first; a later one either fails (the table exists: fine) or is redone as an overwrite
        of the table as it then is, which would drop rows merged meanwhile. A create that
        landed as such an overwrite (version > 1) puts back what it dropped (``_undo_overwrite``).
        """
        try:
            created = self._db.create_table(table, schema=schema)
        except (ValueError, RuntimeError, OSError):
            # "already exists", or a commit conflict with another writer's create: either way
            # the table is there now (if it is not, the error is real).
            if self._open(table) is None:
                raise
            return False
        if created.version > 1:
            self._undo_overwrite(table, created.version)
        retry_commit_conflicts(lambda: _ensure_text_index(self._db.open_table(table)))
        return True

    def _undo_overwrite(self, table: str, version: int) -> None:
        """Our empty create committed as ``version``, over another writer's table: merge back
        the rows of the version before it of every chat that has none now (a chat is never
        removed as a whole, so its absence means this overwrite dropped it)."""
        id_col = ID_COLUMNS[table]

        def restore() -> None:
            before = self._db.open_table(table)
            before.checkout(version - 1)
            dropped = before.to_arrow()
            current = self._db.open_table(table)
            present = set(current.search().select(["chat_file"]).limit(None).to_arrow().column("chat_file").to_pylist())
            lost = dropped.filter(
                pc.invert(pc.is_in(dropped.column("chat_file"), value_set=pa.array(sorted(present), pa.string())))
            )
            if lost.num_rows:
                current.merge_insert(id_col).when_not_matched_insert_all().execute(lost)

        retry_commit_conflicts(restore)

    def health(self) -> dict[str, dict[str, int]]:
        """Per table: rows, data fragments, versions kept, rows not yet in the full-text index."""
        out = {}
        for name in TABLES:
            tbl = self._open(name)
            if tbl is None:
                continue
            fts = _text_index(tbl)
            stats = tbl.index_stats(fts) if fts else None
            out[name] = {
                "rows": tbl.count_rows(),
                "fragments": tbl.stats()["fragment_stats"]["num_fragments"],
                "versions": len(tbl.list_versions()),
                "unindexed_rows": stats.num_unindexed_rows if stats else tbl.count_rows(),
            }
        return out

    def maintain(self, keep_versions_for: timedelta = timedelta(hours=1)) -> dict[str, dict[str, int]]:
        """Compact each table's files, add rows written since to its full-text index and remove
        versions older than ``keep_versions_for`` (readers of an older version must be done by
        then). Returns ``health()`` before and after."""
        before = self.health()
        for name in before:

            def upkeep(name: str = name) -> None:
                # Redone from the newest version when a chat write commits first (compaction
                # rewrites files that write touched).
                tbl = self._open(name)
                _ensure_text_index(tbl)
                tbl.optimize(cleanup_older_than=keep_versions_for)

            retry_commit_conflicts(upkeep)
        return {"before": before, "after": self.health()}

    def versions(self) -> dict[str, int]:
        """Current version of each existing table."""
        out = {}
        for name in TABLES:
            tbl = self._open(name)
            if tbl is not None:
                out[name] = tbl.version
        return out

    def _read(
        self, table: str, chat_file: str | None, columns: list[str] | None = None, where: str | None = None
    ) -> pa.Table | None:
        tbl = self._open(table)
        if tbl is None:
            return None
        query = tbl.search()
        if chat_file is not None:
            query = query.where(f"chat_file = '{validate_chat_file(chat_file)}'" + (f" AND {where}" if where else ""))
        if columns:
            query = query.select(columns)
        return query.limit(None).to_arrow()

    def _frame(
        self, table: str, chat_file: str, order_by: str, empty_schema: pa.Schema, where: str | None = None
    ) -> pl.DataFrame:
        rows = self._read(table, chat_file, where=where)
        frame = pl.from_arrow(rows if rows is not None else empty_schema.empty_table())
        return frame.sort(order_by)

    def messages_for(self, chat_file: str, after_position: int | None = None) -> pl.DataFrame:
        """The chat's message rows in file order (empty if the chat is not indexed); only those
        past ``after_position`` when given (the rows a cached copy lacks)."""
        where = f"position > {int(after_position)}" if after_position is not None else None
        return self._frame("messages", chat_file, "position", message_schema(1), where)

    def blocks_for(self, chat_file: str) -> pl.DataFrame:
        return self._frame("blocks", chat_file, "block_index", block_schema(1))

    def threads_for(self, chat_file: str) -> pl.DataFrame:
        return self._frame("threads", chat_file, "thread_id", thread_schema(1))

    def full_text_search(self, table: str, chat_file: str, query: str, limit: int) -> list[tuple[str, float]]:
        """(id, BM25 score) of the chat's rows matching ``query`` in the table's native FTS index,
        best first (LanceDB tokenizes, stems and drops English stopwords)."""
        tbl = self._open(table)
        if tbl is None:
            return []
        id_col = ID_COLUMNS[table]
        rows = (
            tbl.search(query, query_type="fts")
            .where(f"chat_file = '{validate_chat_file(chat_file)}'", prefilter=True)
            .select([id_col, "_score"])
            .limit(limit)
            .to_arrow()
        )
        return list(zip(rows.column(id_col).to_pylist(), rows.column("_score").to_pylist()))

    def chat_files(self) -> list[str]:
        """Chat files that have indexed messages."""
        rows = self._read("messages", None, ["chat_file"])
        return sorted(set(rows.column("chat_file").to_pylist())) if rows is not None else []

    def row_counts(self) -> Mapping[str, int]:
        return {name: tbl.count_rows() for name in TABLES if (tbl := self._open(name)) is not None}
