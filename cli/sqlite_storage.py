"""Dagster's SQLite run and event-log storages, keeping one pooled engine per database file.

The stock classes create (and for the event log, dispose) a SQLAlchemy engine for every
statement: ~6,700 of them for a build of the 10 RealTalk chats, whose time beside encoding
fell from 16-21 s to 9-10 s with these classes. Files, schema and locking stay Dagster's own;
only connection reuse changes. ``jobs.runner.dagster_home`` writes a dagster.yaml selecting them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
    INDEX_SHARD_NAME,
    SQLITE_BUSY_TIMEOUT_SECONDS,
    SqliteEventLogStorage,
)
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection, Engine

# Run shards are written while their run executes and rarely read afterwards: a few open
# engines cover the current runs; older ones are disposed (their files closed).
OPEN_RUN_SHARDS = 8


def _pooled_engine(conn_string: str) -> Engine:
    # check_same_thread off: a pooled connection may be reused by another thread (the event
    # log watcher, the webserver's workers); Dagster serializes use with its own lock.
    return create_engine(conn_string, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS,
                                                    "check_same_thread": False})


class PooledSqliteEventLogStorage(SqliteEventLogStorage):
    """Dagster's run-sharded SQLite event log with engines kept open per shard."""

    def __init__(self, base_dir: str, inst_data=None):
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._tables_seen: set[str] = set()
        super().__init__(base_dir, inst_data=inst_data)

    @classmethod
    def from_config_value(cls, inst_data, config_value):
        return cls(inst_data=inst_data, **config_value)

    def _engine(self, shard: str) -> Engine:
        engine = self._engines.get(shard)
        if engine is not None:
            self._engines.move_to_end(shard)
            return engine
        engine = self._engines[shard] = _pooled_engine(self.conn_string_for_shard(shard))
        run_shards = [s for s in self._engines if s != INDEX_SHARD_NAME]
        for stale in run_shards[:-OPEN_RUN_SHARDS]:
            self._engines.pop(stale).dispose()
        return engine

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        # Same contract as the parent's: one connection at a time under the storage's lock,
        # each database initialized on first use, one transaction per block.
        with self._db_lock:
            engine = self._engine(shard)
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn, conn.begin():
                yield conn

    def has_table(self, table_name: str) -> bool:
        # Asked before every dynamic-partition lookup (~1,100 times in that build), each time
        # through a new engine. Tables are only ever added (by migrations): cache the yeses.
        if table_name in self._tables_seen:
            return True
        found = super().has_table(table_name)
        if found:
            self._tables_seen.add(table_name)
        return found

    def _dispose_engines(self, keep_index: bool) -> None:
        with self._db_lock:
            for shard in list(self._engines):
                if not (keep_index and shard == INDEX_SHARD_NAME):
                    self._engines.pop(shard).dispose()

    def wipe(self) -> None:
        self._dispose_engines(keep_index=True)  # wipe deletes the run shard files
        super().wipe()

    def dispose(self) -> None:
        super().dispose()
        self._dispose_engines(keep_index=False)


class PooledSqliteRunStorage(SqliteRunStorage):
    """Dagster's SQLite run storage with one engine kept open."""

    def __init__(self, conn_string: str, inst_data=None):
        super().__init__(conn_string, inst_data)
        self._engine = _pooled_engine(conn_string)

    @classmethod
    def from_config_value(cls, inst_data, config_value):
        return cls.from_local(inst_data=inst_data, **config_value)

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        with self._engine.connect() as conn, conn.begin():
            yield conn

    def dispose(self) -> None:
        super().dispose()
        self._engine.dispose()
