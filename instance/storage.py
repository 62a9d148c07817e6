"""The instance's storage: Dagster's SQLite storages keeping one pooled engine per database
file (one machine), or PostgreSQL (many), chosen where the instance is loaded.

The stock SQLite classes create (and for the event log, dispose) a SQLAlchemy engine for every
statement; these keep one (measurements: docs/decisions.md, "Dagster layer"). Files, schema and
locking stay Dagster's own; only connection reuse changes.

``NarrativeMirrorInstance`` is the instance class the generated ``dagster.yaml`` names
(``instance/lifecycle.py``): it writes no path into that file. Its storage defaults are worked out
each time the instance is loaded, from the folder it is loaded from (so a copied or moved home
uses its own files) and from ``NM_DAGSTER_PG_URL``: set, run, event-log and schedule storage
are Dagster's PostgreSQL storage (``dagster-postgres``) at that URL, read from the environment
of every process that loads the instance (the URL itself is never written anywhere).
A ``storage:`` section written into ``dagster.yaml`` by hand wins over both.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

import yaml
from dagster import DagsterInstance
from dagster._core.instance.ref import InstanceRef
from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
    INDEX_SHARD_NAME,
    SQLITE_BUSY_TIMEOUT_SECONDS,
    SqliteEventLogStorage,
)
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._serdes import ConfigurableClassData
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection, Engine

from resources import environment

# Run shards are written while their run executes and rarely read afterwards: a few open
# engines cover the current runs; older ones are disposed (their files closed).
OPEN_RUN_SHARDS = 8


def _pooled_engine(conn_string: str) -> Engine:
    # check_same_thread off: a pooled connection may be reused by another thread (the event
    # log watcher, the webserver's workers); Dagster serializes use with its own lock.
    return create_engine(conn_string, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS, "check_same_thread": False})


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


def _data(module: str, cls: str, config: dict) -> ConfigurableClassData:
    return ConfigurableClassData(module, cls, yaml.dump(config, default_flow_style=False))


def _composite(
    run: ConfigurableClassData, event_log: ConfigurableClassData, schedule: ConfigurableClassData
) -> ConfigurableClassData:
    def part(data: ConfigurableClassData) -> dict:
        return {"module_name": data.module_name, "class_name": data.class_name, "config_yaml": data.config_yaml}

    return _data(
        "dagster._core.storage.legacy_storage",
        "CompositeStorage",
        {"run_storage": part(run), "event_log_storage": part(event_log), "schedule_storage": part(schedule)},
    )


def psycopg2_url(url: str) -> str:
    """``postgresql://`` (or ``postgres://``) URLs with the driver dagster-postgres is built on:
    SQLAlchemy 2.1 reads a bare ``postgresql://`` as psycopg 3, with which Dagster's event log
    fails (``NOTIFY run_events, $1``)."""
    for scheme in ("postgresql://", "postgres://"):
        if url.startswith(scheme):
            return "postgresql+psycopg2://" + url[len(scheme) :]
    return url


# PostgreSQL connections kept open per process and URL. dagster-postgres opens a new connection
# (a new server process) for every statement; several thousand per demo build, which made a
# build on PostgreSQL half again as slow as on SQLite. Shared by every instance of the process
# (a Celery worker makes one per step), so their number stays bounded.
PG_POOL_SIZE = 1
PG_MAX_OVERFLOW = 4
_pg_engines: dict[tuple[int, str], Engine] = {}
_pg_engines_lock = threading.Lock()


def _pooled_pg_engine(url: str) -> Engine:
    key = (os.getpid(), url)  # a forked child opens its own connections
    with _pg_engines_lock:
        engine = _pg_engines.get(key)
        if engine is None:
            from dagster_postgres.utils import create_pg_engine

            engine = _pg_engines[key] = create_pg_engine(
                url,
                isolation_level="AUTOCOMMIT",
                pool_size=PG_POOL_SIZE,
                max_overflow=PG_MAX_OVERFLOW,
                pool_pre_ping=True,
                pool_recycle=3600,
            )
        return engine


def _postgres_class(base):
    """``base`` (a dagster-postgres storage) reading a plain ``postgresql://`` URL with psycopg2,
    its statements on the process's pooled connections."""

    class Pooled(base):
        @classmethod
        def from_config_value(cls, inst_data, config_value):
            from dagster_postgres.utils import pg_url_from_config

            config = {k: v for k, v in config_value.items() if k != "postgres_db"}
            config["postgres_url"] = psycopg2_url(pg_url_from_config(config_value))
            storage = super().from_config_value(inst_data, config)
            engine = _pooled_pg_engine(config["postgres_url"])
            # The unified storage holds the three storages; each connects through its _engine.
            for part in (
                storage,
                *(getattr(storage, a, None) for a in ("_run_storage", "_event_log_storage", "_schedule_storage")),
            ):
                if part is not None and hasattr(part, "_engine"):
                    part._engine = engine
            return storage

    Pooled.__name__ = Pooled.__qualname__ = base.__name__
    Pooled.__module__ = __name__
    return Pooled


def __getattr__(name: str):
    # The PostgreSQL classes import dagster-postgres only when an instance asks for them.
    if name in ("DagsterPostgresStorage", "PostgresRunStorage", "PostgresEventLogStorage", "PostgresScheduleStorage"):
        import dagster_postgres

        cls = globals()[name] = _postgres_class(getattr(dagster_postgres, name))
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def storage_defaults(base_dir: str, pg_url_env: str | None = None) -> dict[str, ConfigurableClassData]:
    """Storage entries of the instance at ``base_dir``: PostgreSQL when ``pg_url_env`` names a
    variable holding its URL (the config keeps the variable, not the URL), else the pooled
    SQLite files in Dagster's default places under ``base_dir``."""
    if pg_url_env:
        config = {"postgres_url": {"env": pg_url_env}}
        return {
            name: _data(__name__, cls, config)
            for name, cls in (
                ("storage", "DagsterPostgresStorage"),
                ("run_storage", "PostgresRunStorage"),
                ("event_log_storage", "PostgresEventLogStorage"),
                ("schedule_storage", "PostgresScheduleStorage"),
            )
        }
    run = _data(__name__, "PooledSqliteRunStorage", {"base_dir": os.path.join(base_dir, "history")})
    event_log = _data(__name__, "PooledSqliteEventLogStorage", {"base_dir": os.path.join(base_dir, "history", "runs")})
    schedule = _data(
        "dagster._core.storage.schedules", "SqliteScheduleStorage", {"base_dir": os.path.join(base_dir, "schedules")}
    )
    return {
        "storage": _composite(run, event_log, schedule),
        "run_storage": run,
        "event_log_storage": event_log,
        "schedule_storage": schedule,
    }


class NarrativeMirrorInstance(DagsterInstance):
    """Dagster's instance with the storage defaults above (``instance_class`` in dagster.yaml).

    Everything else (artifacts, compute logs, run launcher and coordinator) keeps Dagster's
    defaults under the folder the instance is loaded from; a section of dagster.yaml overrides
    any of it as usual. Processes started from an instance reference (run workers, Celery
    workers) receive the storage chosen by the process that made the reference.
    """

    @classmethod
    def config_schema(cls) -> dict:
        return {}

    @classmethod
    def config_defaults(cls, base_dir: str) -> dict:
        defaults = dict(InstanceRef.config_defaults(base_dir))
        defaults.update(storage_defaults(base_dir, environment.dagster_pg_url_env()))
        return defaults
