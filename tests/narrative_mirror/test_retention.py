"""Retention: the setting (retention.toml: by age, default keep; recall runs also by count, default
the newest 2000), pruning recall-run files and retrieval events past it (real files, real
LanceDB), through the library, the CLI's `maintain`, the Dagster `maintain_job` (real instance)
and as recall runs are written."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from event_factory import event

from cli.main import main
from jobs.events import maintain_job, maintain_schedule
from narrative_mirror.events.table import read_events
from narrative_mirror.events.writer import EventLog
from narrative_mirror.maintenance import prune
from narrative_mirror.recall_runs import write_run
from narrative_mirror.retention import DEFAULT_KEEP_RUNS, Retention, load_retention
from resources.dagster_resources import LanceDBResource, StateResource

NOW = datetime.now(UTC)


def fill(home: Path) -> None:
    """Recall runs 40 and 10 days old (two of them the same day) and events 100 and 20 days old."""
    for days in (40, 40, 10):
        write_run("q", {}, [], [], root=home / "recall_runs", now=NOW - timedelta(days=days))
    log = EventLog(home / "lancedb")
    for days in (100, 100, 100, 20):
        log.log(event(f"{days} days ago", at=NOW - timedelta(days=days)))
    log.close()


def test_the_default_keeps_any_age_and_the_last_2000_runs_and_bad_settings_are_refused():
    assert load_retention() == Retention(None, None, DEFAULT_KEEP_RUNS) and DEFAULT_KEEP_RUNS == 2000
    assert load_retention({}) == load_retention()  # a retention.toml without keep_last still bounds the runs
    assert load_retention({"recall_runs": {"keep_days": 30, "keep_last": 5}}) == Retention(30, None, 5)
    for config, field in (
        ({"recall_runs": {"keep_days": 0}}, "keep_days"),
        ({"runs": {}}, "unknown sections"),
        ({"recall_runs": {"keep_last": 0}}, "keep_last"),
        ({"retrieval_events": {"keep_last": 3}}, "unknown keys"),
        ({"retrieval_events": {"keep_days": "30"}}, "keep_days"),
        ({"retrieval_events": {"days": 3}}, "unknown keys"),
    ):
        with pytest.raises(ValueError, match=field):
            load_retention(config)


def test_prune_removes_what_is_older_than_the_setting(tmp_path):
    fill(tmp_path)
    assert prune(tmp_path / "recall_runs", str(tmp_path / "lancedb"), Retention()) == {
        "recall_runs": {
            "keep_days": None,
            "keep_last": DEFAULT_KEEP_RUNS,
            "removed_files": 0,
            "removed_bytes": 0,
            "removed_folders": 0,
            "kept_files": 3,
        },
        "retrieval_events": {"keep_days": None, "removed": 0},
    }
    report = prune(tmp_path / "recall_runs", str(tmp_path / "lancedb"), Retention(30, 90), now=NOW)
    assert report["recall_runs"]["removed_files"] == 2 and report["recall_runs"]["removed_folders"] == 1
    assert report["recall_runs"]["removed_bytes"] > 0
    assert report["retrieval_events"] == {"keep_days": 90, "removed": 3}
    assert len(list((tmp_path / "recall_runs").rglob("run_*.json"))) == 1
    assert read_events(tmp_path / "lancedb")["query"].to_list() == ["20 days ago"]


def test_cli_maintain_prunes_by_the_configured_retention(tmp_path, monkeypatch, capsys):
    home = Path(os.environ["NM_HOME"])
    fill(home)
    config = tmp_path / "config"
    config.mkdir()
    (config / "retention.toml").write_text("[recall_runs]\nkeep_days = 30\n[retrieval_events]\nkeep_days = 90\n")
    monkeypatch.setenv("NM_CONFIG_DIR", str(config))
    assert main(["maintain", "--json"]) == 0
    pruned = json.loads(capsys.readouterr().out)["pruned"]
    assert (pruned["recall_runs"]["removed_files"], pruned["retrieval_events"]["removed"]) == (2, 3)


def test_the_maintain_job_prunes_on_a_real_instance(tmp_path, monkeypatch):
    home = Path(os.environ["NM_HOME"])
    fill(home)
    config = tmp_path / "config"
    config.mkdir()
    (config / "retention.toml").write_text("[retrieval_events]\nkeep_days = 90\n")
    monkeypatch.setenv("NM_CONFIG_DIR", str(config))
    state = StateResource(home=str(home))
    with dg_instance(tmp_path) as instance:
        result = maintain_job.execute_in_process(
            instance=instance, resources={"lancedb": LanceDBResource(state=state), "state": state}
        )
    assert result.success
    report = result.output_for_node("prune_by_age")
    assert report["retrieval_events"] == {"keep_days": 90, "removed": 3}
    assert report["recall_runs"]["removed_files"] == 0  # no keep_days for recall runs: kept
    assert len(list((home / "recall_runs").rglob("run_*.json"))) == 3
    assert maintain_schedule.job_name == "maintain_job"


def test_recall_runs_stay_within_keep_last_as_they_are_written(tmp_path, monkeypatch):
    config = tmp_path / "config"
    config.mkdir()
    (config / "retention.toml").write_text("[recall_runs]\nkeep_last = 20\n")
    monkeypatch.setenv("NM_CONFIG_DIR", str(config))
    root = tmp_path / "recall_runs"
    written = [write_run(f"q{i}", {}, [], [], root=root, now=NOW - timedelta(days=3, seconds=-i)) for i in range(300)]
    kept = sorted(root.rglob("run_*.json"))
    assert 20 <= len(kept) <= 22  # pruned back to 20 each time it passes 22
    assert set(kept) <= set(written[-22:])  # the newest are the ones kept
    assert written[-1] in kept


def dg_instance(tmp_path):
    import dagster as dg

    (tmp_path / "dagster").mkdir(exist_ok=True)
    return dg.instance_for_test(temp_dir=str(tmp_path / "dagster"))
