"""The Dagster instance in ``$NM_HOME/dagster``: its settings file, one command at a time, and
recovery of runs whose process was killed.

Deliberately light (no Dagster import at module level): the question path imports it to find
the home without paying for Dagster.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import socket
import sys
from pathlib import Path

from narrative_mirror.home import Home
from resources import environment

# Written when the instance has no settings yet (or still has one of our previous defaults); an
# edited dagster.yaml is left alone. Telemetry off: this runs offline, and every step would append
# to logs/event.log. No path in it: the instance class (instance/storage.py) puts Dagster's SQLite
# files in their default places under the folder the instance is loaded from, through classes that
# keep their database connections open, or uses PostgreSQL when NM_DAGSTER_PG_URL is set. A copied
# or moved home therefore works where it is and never writes into the old one.
INSTANCE_YAML = """# Written by narrative-mirror; once edited, it is left alone. No path in it: the instance class
# keeps Dagster's SQLite files under this folder (PooledSqliteRunStorage, PooledSqliteEventLogStorage),
# or uses PostgreSQL when NM_DAGSTER_PG_URL is set (README: One machine or many).
telemetry:
  enabled: false
instance_class:
  module: {module}
  class: NarrativeMirrorInstance
"""
STORAGE_MODULE = "instance.storage"
# Where the storage classes lived before; settings an earlier version wrote naming them are upgraded.
PREVIOUS_STORAGE_MODULES = ["cli.sqlite_storage", "jobs.sqlite_storage", "jobs.instance_storage"]
# The earlier modules that INSTANCE_YAML (no path) was written with; all wrote PREVIOUS_PATH_YAML.
PREVIOUS_INSTANCE_MODULES = ["cli.sqlite_storage", "jobs.instance_storage"]
PREVIOUS_DEFAULT_YAML = "telemetry:\n  enabled: false\n"
# What earlier versions wrote: the pooled SQLite storages with the home's absolute paths baked in.
PREVIOUS_PATH_YAML = """telemetry:
  enabled: false
run_storage:
  module: {module}
  class: PooledSqliteRunStorage
  config:
    base_dir: {runs_dir}
event_log_storage:
  module: {module}
  class: PooledSqliteEventLogStorage
  config:
    base_dir: {event_log_dir}
"""
_BASE_DIR_RE = re.compile(r'^    base_dir: (".*")$', re.M)

# Tags on every run the command line launches: who launched it, and which process runs it.
LAUNCHER_TAG = "narrative_mirror/launched_by"
PID_TAG = "narrative_mirror/pid"
HOST_TAG = "narrative_mirror/host"


def _instance_yaml() -> str:
    return INSTANCE_YAML.format(module=STORAGE_MODULE)


def _previous_path_yaml(home: Path, module: str) -> str:
    # JSON strings are YAML strings: any path quotes safely.
    return PREVIOUS_PATH_YAML.format(
        module=module,
        runs_dir=json.dumps(str(home / "history")),
        event_log_dir=json.dumps(str(home / "history" / "runs")),
    )


def generated_by_us(text: str) -> bool:
    """Whether ``text`` is a dagster.yaml that this or an earlier version wrote, unedited,
    wherever the home it was written for was then (a copied or moved home keeps the old paths)."""
    text = text.strip()
    modules = [STORAGE_MODULE, *PREVIOUS_STORAGE_MODULES]
    instance_yamls = (INSTANCE_YAML.format(module=m).strip() for m in [STORAGE_MODULE, *PREVIOUS_INSTANCE_MODULES])
    if text in ("", PREVIOUS_DEFAULT_YAML.strip(), *instance_yamls):
        return True
    match = _BASE_DIR_RE.search(text)  # the first: the run storage's <home>/dagster/history
    try:
        runs_dir = Path(json.loads(match[1])) if match else None
    except ValueError:
        return False
    return (
        runs_dir is not None
        and runs_dir.name == "history"
        and runs_dir.parent.name == "dagster"
        and any(text == _previous_path_yaml(runs_dir.parent, m).strip() for m in modules)
    )


def dagster_home() -> Path:
    home = Home(environment.nm_home()).instance
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    text = config.read_text() if config.is_file() else None
    if text is None or (text != _instance_yaml() and generated_by_us(text)):
        tmp = config.with_name(f".dagster.yaml.{os.getpid()}.tmp")
        tmp.write_text(_instance_yaml())
        tmp.replace(config)  # atomic: a process loading the instance meanwhile reads one or the other
    return home


class HomeLock:
    """One command at a time on a home: held while a command reads or changes the instance.

    Two commands started together therefore never race to create the instance's tables, and the
    second one finds the first one's work done instead of doing it again. The Dagster daemon
    does not take this lock; it and the command line keep out of each other's way through the
    instance (runs in progress are never started twice, see cli/runner.py).
    """

    def __init__(self, home: Path, progress=lambda msg: print(msg, file=sys.stderr, flush=True)):
        self.path = home / "narrative-mirror.lock"
        self.progress = progress
        self._file = None

    def __enter__(self) -> HomeLock:
        self._file = self.path.open("a+")
        try:
            fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.seek(0)
            holder = self._file.read().strip() or "another process"
            self.progress(f"waiting for another narrative-mirror command on {self.path.parent} ({holder})")
            fcntl.flock(self._file, fcntl.LOCK_EX)
        self._file.seek(0)
        self._file.truncate()
        self._file.write(f"pid {os.getpid()} on {socket.gethostname()}")
        self._file.flush()
        return self

    def __exit__(self, *exc) -> None:
        if self._file is not None:
            self._file.truncate(0)
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None


def run_tags() -> dict[str, str]:
    return {LAUNCHER_TAG: "cli", PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        pass
    return True


def fail_interrupted_runs(instance) -> list[str]:
    """Mark failed the command-line runs still "in progress" whose process is gone (killed,
    machine restarted), so their partitions count as not built and are redone. Returns their ids.

    Called under the home lock: no other command of this home can be running them.
    """
    import dagster as dg

    in_progress = [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
    host = socket.gethostname()
    failed = []
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=in_progress, tags={LAUNCHER_TAG: "cli"})):
        pid = run.tags.get(PID_TAG, "")
        if run.tags.get(HOST_TAG) != host or (pid.isdigit() and _alive(int(pid)) and int(pid) != os.getpid()):
            continue
        instance.report_run_failed(
            run, f"interrupted: the narrative-mirror process (pid {pid or '?'}) running it is gone"
        )
        failed.append(run.run_id)
    return failed
