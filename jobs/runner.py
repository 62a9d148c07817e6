"""Drives the asset graph in-process against the persistent Dagster instance in NM_HOME.

Used by the ``narrative-mirror`` command: registers chat files as partitions, observes the
config files, and materializes only what is missing or stale, partition by partition, so
repeated commands redo only what changed. The same instance backs ``dg dev`` when
``DAGSTER_HOME`` points at ``$NM_HOME/dagster``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import dagster as dg
import polars as pl
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
from dagster._time import get_current_datetime

from assets.config_sources import CONFIG_SOURCES
from assets.partitions import chat_files
from narrative_mirror import settings, storage
from narrative_mirror.keys import find_chat_files


# Progress goes through Runner.progress; Dagster's own console log only for problems.
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# Written when the instance has no settings yet (or still has the previous default); an edited
# dagster.yaml is left alone. Telemetry off: this runs offline, and every step would append to
# logs/event.log. Storage: Dagster's SQLite files in their default places, through classes that
# keep their database connections open (jobs/sqlite_storage.py).
INSTANCE_YAML = """telemetry:
  enabled: false
run_storage:
  module: jobs.sqlite_storage
  class: PooledSqliteRunStorage
  config:
    base_dir: {runs_dir}
event_log_storage:
  module: jobs.sqlite_storage
  class: PooledSqliteEventLogStorage
  config:
    base_dir: {event_log_dir}
"""
PREVIOUS_DEFAULT_YAML = "telemetry:\n  enabled: false\n"


def dagster_home() -> Path:
    home = settings.nm_home() / "dagster"
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.is_file() or config.read_text().strip() in ("", PREVIOUS_DEFAULT_YAML.strip()):
        # JSON strings are YAML strings: any path quotes safely.
        config.write_text(INSTANCE_YAML.format(runs_dir=json.dumps(str(home / "history")),
                                               event_log_dir=json.dumps(str(home / "history" / "runs"))))
    return home


class Runner:
    def __init__(self, data_dir: Path | None = None, arcs_dir: Path | None = None,
                 progress: Callable[[str], None] = _stderr):
        from definitions import build_definitions
        from resources import default_resources

        os.environ["DAGSTER_HOME"] = str(dagster_home())
        self.progress = progress
        self.data_dir = Path(data_dir).resolve() if data_dir else settings.data_dir()
        self.resources = default_resources(data_dir=str(self.data_dir), arcs_dir=str(arcs_dir or ""))
        self.arcs_dir = self.resources["chat_data"].arcs_path()
        self.defs = build_definitions(self.resources)
        self.asset_graph = self.defs.resolve_asset_graph()
        self.assets = list(self.defs.assets)
        self.instance = dg.DagsterInstance.get()
        self.storage_base = settings.nm_home() / "storage"

    # -- partitions -------------------------------------------------------------------------
    def register(self) -> list[str]:
        files, problems = find_chat_files(self.data_dir)
        for problem in problems:
            self.progress(f"skipped: {problem}")
        if not files:
            raise FileNotFoundError(f"no chat files (*.json) in {self.data_dir}")
        known = set(self.instance.get_dynamic_partitions(chat_files.name))
        new = sorted(set(files) - known)
        if new:
            self.instance.add_dynamic_partitions(chat_files.name, new)
        return sorted(files)

    def observe_configs(self, keys: Sequence[dg.AssetKey]) -> None:
        """Record the current version of the config files that ``keys`` read."""
        from dagster._core.definitions.observe import observe

        parents = {p for k in keys for p in self.asset_graph.get(k).parent_keys}
        sources = [s for s in CONFIG_SOURCES if s.key in parents]
        if sources:
            observe(sources, instance=self.instance, run_config=QUIET)

    # -- staleness --------------------------------------------------------------------------
    def _resolver(self) -> CachingStaleStatusResolver:
        view = AssetGraphView(
            temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
            instance=self.instance,
            asset_graph=self.asset_graph,
        )
        return CachingStaleStatusResolver(self.instance, self.asset_graph, view)

    def _needs_run(self, keys: Sequence[dg.AssetKey], partition: str | None) -> list[dg.AssetKey]:
        """Assets of ``keys`` (topologically ordered) that are missing/stale, plus their
        downstream within ``keys`` (staleness moves one hop per materialization)."""
        resolver = self._resolver()
        chosen: set[dg.AssetKey] = set()
        for key in keys:
            upstream_chosen = any(p in chosen for p in self.asset_graph.get(key).parent_keys)
            if upstream_chosen or resolver.get_status(key, partition) != StaleStatus.FRESH:
                chosen.add(key)
        return [k for k in keys if k in chosen]

    def _ordered(self, selection: Sequence[str]) -> list[dg.AssetKey]:
        wanted = {dg.AssetKey(s) for s in selection}
        order = self.asset_graph.toposorted_asset_keys
        return [k for k in order if k in wanted]

    # -- running ----------------------------------------------------------------------------
    def materialize(self, selection: Sequence[str], partitions: Sequence[str] | None,
                    tags: dict[str, str] | None = None, force: bool = False) -> dict[str, float]:
        """Materialize ``selection`` for each partition (or unpartitioned when ``partitions`` is
        None), skipping what is fresh. Returns wall seconds per asset."""
        keys = self._ordered(selection)
        self.observe_configs(keys)
        seconds: dict[str, float] = {}
        targets = list(partitions) if partitions is not None else [None]
        failures: list[str] = []
        for i, partition in enumerate(targets, 1):
            todo = keys if force else self._needs_run(keys, partition)
            label = partition or "(all)"
            if not todo:
                self.progress(f"[{i}/{len(targets)}] {label}: up to date")
                continue
            self.progress(f"[{i}/{len(targets)}] {label}: {', '.join(k.to_user_string() for k in todo)}")
            result = dg.materialize(
                self.assets,
                selection=todo,
                partition_key=partition,
                instance=self.instance,
                resources=self.resources,
                tags=tags,
                raise_on_error=False,
                run_config=QUIET,
            )
            for event in result.all_events:
                if event.event_type_value == "STEP_SUCCESS":
                    name = event.step_key
                    seconds[name] = seconds.get(name, 0.0) + event.event_specific_data.duration_ms / 1000
            if not result.success:
                # One bad chat file must not stop the others: report it and go on.
                failures.append(f"{label}: {_failure_message(result)}")
                self.progress(f"[{i}/{len(targets)}] {label}: FAILED {failures[-1]}")
        if failures:
            raise RunFailed(failures)
        return seconds

    def stored(self, asset: str, partition: str | None) -> pl.DataFrame | None:
        path = storage.frame_path(self.storage_base, asset, partition)
        return storage.read_frame(path) if path.is_file() else None

    def read(self, asset: str, partition: str | None) -> pl.DataFrame:
        return storage.read_frame(storage.frame_path(self.storage_base, asset, partition))


class RunFailed(RuntimeError):
    def __init__(self, failures: list[str]):
        super().__init__(f"{len(failures)} run(s) failed:\n  " + "\n  ".join(failures))
        self.failures = failures


def _failure_message(result) -> str:
    for event in result.all_events:
        if event.event_type_value == "STEP_FAILURE":
            err = event.event_specific_data.error
            cause = err.cause.message.strip() if err and err.cause else ""
            return f"{event.step_key}: {err.message.strip() if err else 'failed'} {cause}".strip()
    for event in result.all_events:
        if event.event_type_value == "ASSET_CHECK_EVALUATION" and not event.event_specific_data.passed:
            return f"blocking check failed: {event.event_specific_data.check_name}"
    return "run did not succeed"


def timed(fn: Callable[[], object]) -> tuple[object, float]:
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start
