"""The Dagster instance folder in NM_HOME and its pooled SQLite storage."""

import dagster as dg

from instance.lifecycle import PREVIOUS_DEFAULT_YAML, dagster_home
from instance.storage import PooledSqliteEventLogStorage, PooledSqliteRunStorage


@dg.asset
def numbers() -> int:
    return 1


def test_instance_settings_written_once_and_edits_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("NM_HOME", str(tmp_path))
    config = dagster_home() / "dagster.yaml"
    written = config.read_text()
    assert "enabled: false" in written and "PooledSqliteEventLogStorage" in written
    config.write_text("telemetry:\n  enabled: true\n")
    dagster_home()
    assert config.read_text() == "telemetry:\n  enabled: true\n"
    config.write_text(PREVIOUS_DEFAULT_YAML)  # what earlier versions wrote is upgraded
    dagster_home()
    assert config.read_text() == written


def test_instance_uses_pooled_sqlite_storage_in_the_default_folders(tmp_path, monkeypatch):
    monkeypatch.setenv("NM_HOME", str(tmp_path / "home with: odd # chars"))
    home = dagster_home()
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert isinstance(instance.run_storage, PooledSqliteRunStorage)
        assert isinstance(instance.event_log_storage, PooledSqliteEventLogStorage)
        for _ in range(3):
            assert dg.materialize([numbers], instance=instance).success
        assert len(instance.get_runs()) == 3
        assert instance.get_latest_materialization_event(dg.AssetKey("numbers")) is not None
        wiped_run = instance.get_runs()[-1].run_id
        instance.event_log_storage.wipe()
        assert instance.get_latest_materialization_event(dg.AssetKey("numbers")) is None
        assert dg.materialize([numbers], instance=instance).success
        assert instance.get_latest_materialization_event(dg.AssetKey("numbers")) is not None
        assert not instance.all_logs(wiped_run)
    # Dagster's own file layout: runs.db, and the event-log index shard beside the run shards
    assert (home / "history" / "runs.db").is_file()
    assert (home / "history" / "runs" / "index.db").is_file()


def test_event_log_keeps_few_run_shards_open_and_reopens_evicted_ones(tmp_path, monkeypatch):
    import instance.storage as instance_storage

    monkeypatch.setattr(instance_storage, "OPEN_RUN_SHARDS", 2)
    monkeypatch.setenv("NM_HOME", str(tmp_path))
    with dg.DagsterInstance.from_config(str(dagster_home())) as instance:
        run_ids = [dg.materialize([numbers], instance=instance).run_id for _ in range(5)]
        storage = instance.event_log_storage
        assert len(storage._engines) <= 1 + 2  # the index shard + two run shards
        for run_id in run_ids:  # evicted shards open again on demand
            assert any(e.dagster_event_type == dg.DagsterEventType.RUN_SUCCESS for e in instance.all_logs(run_id))
