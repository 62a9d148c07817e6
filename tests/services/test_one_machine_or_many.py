"""The settings that choose one machine or many, without servers (these run in the default suite):
a relocatable NM_HOME, the instance's storage chosen by NM_DAGSTER_PG_URL, the executor by
NM_CELERY_BROKER_URL, the index's place and object-store options by NM_LANCEDB_URI and AWS_*."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import pytest
from home_instance import home_instance

from instance.lifecycle import (
    INSTANCE_YAML,
    PREVIOUS_DEFAULT_YAML,
    STORAGE_MODULE,
    _previous_path_yaml,
    dagster_home,
    generated_by_us,
)
from instance.storage import (
    NarrativeMirrorInstance,
    PooledSqliteEventLogStorage,
    PooledSqliteRunStorage,
    psycopg2_url,
    storage_defaults,
)
from resources.dagster_resources import LanceDBResource


@dg.asset
def numbers() -> int:
    return 1


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


def _materialize_in(home: Path, monkeypatch, times: int = 1) -> int:
    monkeypatch.setenv("NM_HOME", str(home))
    with home_instance() as instance:
        assert isinstance(instance, NarrativeMirrorInstance)
        assert isinstance(instance.run_storage, PooledSqliteRunStorage)
        assert isinstance(instance.event_log_storage, PooledSqliteEventLogStorage)
        for _ in range(times):
            assert dg.materialize([numbers], instance=instance).success
        return len(instance.get_runs())


def test_generated_settings_hold_no_path(tmp_path, monkeypatch):
    monkeypatch.setenv("NM_HOME", str(tmp_path / "home"))
    text = (dagster_home() / "dagster.yaml").read_text()
    assert text == INSTANCE_YAML.format(module=STORAGE_MODULE)
    assert str(tmp_path) not in text and "base_dir" not in text


def test_a_copied_home_works_where_it_is_and_never_writes_into_the_old_one(tmp_path, monkeypatch):
    old, new = tmp_path / "old", tmp_path / "new"
    assert _materialize_in(old, monkeypatch, times=2) == 2
    shutil.copytree(old, new)
    before = _snapshot(old)
    assert _materialize_in(new, monkeypatch) == 3  # the copied history, plus one
    assert _snapshot(old) == before
    assert _materialize_in(old, monkeypatch) == 3  # and the old one goes on by itself


def test_a_moved_home_works_and_the_old_place_is_not_recreated(tmp_path, monkeypatch):
    old, moved = tmp_path / "old", tmp_path / "elsewhere" / "moved"
    _materialize_in(old, monkeypatch)
    moved.parent.mkdir()
    shutil.move(old, moved)
    assert _materialize_in(moved, monkeypatch) == 2
    assert not old.exists()


@pytest.mark.parametrize("module", ["jobs.instance_storage", "cli.sqlite_storage", "jobs.sqlite_storage"])
def test_settings_written_by_earlier_versions_are_upgraded_wherever_they_were_written(tmp_path, monkeypatch, module):
    old, new = tmp_path / "old home: odd # chars", tmp_path / "new"
    _materialize_in(old, monkeypatch)
    shutil.copytree(old, new)
    # What an earlier version wrote in the old place (absolute paths), now in the copy.
    (new / "dagster" / "dagster.yaml").write_text(_previous_path_yaml(old / "dagster", module))
    before = _snapshot(old)
    assert _materialize_in(new, monkeypatch) == 2
    assert (new / "dagster" / "dagster.yaml").read_text() == INSTANCE_YAML.format(module=STORAGE_MODULE)
    assert _snapshot(old) == before
    # ... and in its own place, as before.
    (old / "dagster" / "dagster.yaml").write_text(_previous_path_yaml(old / "dagster", module))
    assert _materialize_in(old, monkeypatch) == 2
    assert (old / "dagster" / "dagster.yaml").read_text() == INSTANCE_YAML.format(module=STORAGE_MODULE)


@pytest.mark.parametrize("module", ["cli.sqlite_storage", "jobs.instance_storage"])
def test_settings_naming_the_storage_module_of_an_earlier_version_are_upgraded(tmp_path, monkeypatch, module):
    home = tmp_path / "home"
    _materialize_in(home, monkeypatch)
    (home / "dagster" / "dagster.yaml").write_text(INSTANCE_YAML.format(module=module))
    assert _materialize_in(home, monkeypatch) == 2
    assert (home / "dagster" / "dagster.yaml").read_text() == INSTANCE_YAML.format(module=STORAGE_MODULE)


def test_edited_settings_are_left_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("NM_HOME", str(tmp_path / "home"))
    config = dagster_home() / "dagster.yaml"
    generated = _previous_path_yaml(tmp_path / "home" / "dagster", STORAGE_MODULE)
    for edited in [
        generated + "# mine\n",
        generated.replace("enabled: false", "enabled: true"),
        # Storage deliberately put somewhere that is not a home's dagster/history folder.
        _previous_path_yaml(tmp_path / "shared", STORAGE_MODULE),
        INSTANCE_YAML.format(module=STORAGE_MODULE) + "storage:\n  postgres:\n    postgres_url: x\n",
    ]:
        config.write_text(edited)
        dagster_home()
        assert config.read_text() == edited
        assert not generated_by_us(edited)
    for ours in [PREVIOUS_DEFAULT_YAML, "", generated]:
        assert generated_by_us(ours)


def test_edited_settings_naming_the_instance_module_of_an_earlier_version_still_load(tmp_path, monkeypatch):
    """A dagster.yaml edited by hand is never rewritten: one that still names the instance class's
    old module (jobs.instance_storage) loads the same instance and storages."""
    home = tmp_path / "home"
    monkeypatch.setenv("NM_HOME", str(home))
    config = dagster_home() / "dagster.yaml"
    edited = INSTANCE_YAML.format(module="jobs.instance_storage") + "# mine\n"
    config.write_text(edited)
    assert _materialize_in(home, monkeypatch) == 1
    assert config.read_text() == edited


def test_the_postgres_url_setting_selects_postgres_and_is_never_written(tmp_path, monkeypatch):
    base = str(tmp_path / "dagster")
    sqlite = storage_defaults(base)
    assert sqlite["run_storage"].class_name == "PooledSqliteRunStorage" and base in sqlite["run_storage"].config_yaml
    monkeypatch.setenv("NM_DAGSTER_PG_URL", "postgresql://nm:secret@db.internal:5432/nm")
    pg = NarrativeMirrorInstance.config_defaults(base)
    assert pg["storage"].class_name == "DagsterPostgresStorage" and pg["storage"].module_name == "instance.storage"
    assert all(
        "NM_DAGSTER_PG_URL" in pg[k].config_yaml and "secret" not in pg[k].config_yaml
        for k in ("storage", "run_storage", "event_log_storage", "schedule_storage")
    )
    assert pg["compute_logs"].config_yaml == sqlite_compute_logs(base)
    monkeypatch.delenv("NM_DAGSTER_PG_URL")
    assert NarrativeMirrorInstance.config_defaults(base)["storage"].class_name == "CompositeStorage"
    assert psycopg2_url("postgresql://u:p@h/db") == "postgresql+psycopg2://u:p@h/db"
    assert psycopg2_url("postgres://u@h/db") == "postgresql+psycopg2://u@h/db"
    assert psycopg2_url("postgresql+psycopg2://u@h/db") == "postgresql+psycopg2://u@h/db"


def sqlite_compute_logs(base: str) -> str:
    from dagster._core.instance.ref import InstanceRef

    return InstanceRef.config_defaults(base)["compute_logs"].config_yaml


def test_the_index_resource_defaults_to_nm_home_and_takes_object_storage_from_the_environment(tmp_path, monkeypatch):
    from resources.dagster_resources import default_resources

    monkeypatch.setenv("NM_HOME", str(tmp_path / "home"))
    local = default_resources()["lancedb"]
    assert local.resolved_uri() == str(tmp_path / "home" / "lancedb") and local.storage_options() is None
    assert local.get().uri == local.resolved_uri()

    for key, value in {
        "NM_LANCEDB_URI": "s3://team-bucket/nm",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "id",
        "AWS_SECRET_ACCESS_KEY": "secret",
    }.items():
        monkeypatch.setenv(key, value)
    remote = default_resources()["lancedb"]
    assert remote.resolved_uri() == "s3://team-bucket/nm"
    # The keys are environment references: resolved where the step runs, never stored with a run.
    assert isinstance(remote.secret_access_key, dg.EnvVar) and isinstance(remote.access_key_id, dg.EnvVar)
    assert _options_in_a_run(remote) == {
        "aws_endpoint": "http://127.0.0.1:9000",
        "aws_region": "eu-west-1",
        "aws_access_key_id": "id",
        "aws_secret_access_key": "secret",
        "allow_http": "true",
    }
    monkeypatch.setenv("AWS_ALLOW_HTTP", "false")
    assert "allow_http" not in _options_in_a_run(default_resources()["lancedb"])


def _options_in_a_run(resource) -> dict:
    """The storage options an asset sees in a run (EnvVar fields resolved as Dagster does)."""
    seen = {}

    @dg.asset
    def probe(lancedb: LanceDBResource) -> None:
        seen.update(lancedb.storage_options() or {})

    assert dg.materialize([probe], resources={"lancedb": resource}).success
    return seen


def test_the_broker_setting_selects_the_celery_executor(monkeypatch):
    from definitions import build_definitions, executor_from_env
    from resources.dagster_resources import default_resources

    assert executor_from_env() is None
    default = build_definitions(default_resources()).resolve_job_def("build_job").executor_def
    assert default.name == "multi_or_in_process_executor"
    monkeypatch.setenv("NM_CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
    defs = build_definitions(default_resources())
    assert {defs.resolve_job_def(j).executor_def.name for j in ("ingest_job", "build_job", "train_eval_job")} == {
        "celery"
    }
