"""``eval --profile``: the profile is run config, recorded by Dagster with each evaluation; a
partition is evaluated again when the freshness rule says so or when it was evaluated with
another profile, and otherwise not at all (real instance and embedder, demo chats)."""

import json
import os
import re
import shutil
from pathlib import Path

import dagster as dg
import pytest

from assets.evaluation.run_config import recorded_profile
from cli.main import main
from instance.lifecycle import dagster_home
from narrative_mirror import settings
from narrative_mirror import split as split_lib
from narrative_mirror.keys import find_chat_files

EVALUATIONS = ("qa_eval", "arc_eval")


@pytest.fixture
def data(tmp_path, monkeypatch):
    """The demo chats, evaluated with a regression tolerance no profile change trips (another
    profile may score lower, and a blocking regression check would fail the run: not what this
    is about)."""
    shutil.copytree(settings.DEMO_DATA_DIR, tmp_path / "chats")
    shutil.copytree(settings.DEMO_ARCS_DIR, tmp_path / "chats_arcs")
    evaluation = settings.config_path("evaluation").read_text()
    evaluation, n = re.subn(r"^error_drop = [0-9.]+", "error_drop = 1.0", evaluation, flags=re.M)
    assert n == 1
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "evaluation.toml").write_text(evaluation)
    monkeypatch.setenv("NM_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path / "chats"


def _eval(capsys, data, *extra) -> dict:
    """The command's JSON without what varies between two runs of the same evaluation: latencies,
    and ``warnings`` (those of the ingest, said when it runs)."""
    assert main(["eval", "--data", str(data), "--split", "train", "--json", *extra]) == 0
    result = json.loads(capsys.readouterr().out)
    result.pop("warnings")
    return _without_latency(result)


def _without_latency(value):
    if isinstance(value, dict):
        return {k: _without_latency(v) for k, v in value.items() if "latency" not in k}
    return value


def _evaluations(train: list[str]) -> dict[tuple[str, str], tuple[int, str | None]]:
    """(asset, chat file) -> (storage id of its latest materialization, profile its run asked for)."""
    with dg.DagsterInstance.from_config(str(dagster_home())) as instance:
        latest = {}
        for asset in EVALUATIONS:
            for key in train:
                record = instance.fetch_materializations(
                    dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[key]), limit=1
                ).records[0]
                latest[(asset, key)] = (record.storage_id, recorded_profile(instance, asset, key))
        return latest


@pytest.mark.slow
def test_eval_profile_is_recorded_and_only_another_profile_evaluates_again(data, capsys):
    train = split_lib.keys_in(split_lib.TRAIN, sorted(find_chat_files(data)[0]))
    assert len(train) == 2

    balanced = _eval(capsys, data)
    first = _evaluations(train)
    assert {profile for _, profile in first.values()} == {""}  # the profile of config/evaluation.toml

    # Nothing changed: no evaluation runs again, the figures are the same.
    again = _eval(capsys, data)
    assert _evaluations(train) == first
    assert again == balanced

    # Another profile: every train evaluation runs again with it, and Dagster records it.
    fast = _eval(capsys, data, "--profile", "fast")
    after_fast = _evaluations(train)
    assert all(after_fast[k][0] > first[k][0] and after_fast[k][1] == "fast" for k in first)
    assert fast["fingerprint"] != balanced["fingerprint"]

    # The same profile once more: nothing runs.
    assert _eval(capsys, data, "--profile", "fast") == fast
    assert _evaluations(train) == after_fast


@pytest.mark.slow
def test_a_standing_regression_fails_every_eval_until_the_baseline_is_pinned(data, capsys):
    from narrative_mirror import regressions

    train = split_lib.keys_in(split_lib.TRAIN, sorted(find_chat_files(data)[0]))
    _eval(capsys, data)
    home = Path(os.environ["NM_HOME"])
    # As qa_eval records a failed check (tests/assets/test_regression_baseline.py): nothing changed
    # since, so this eval runs nothing, and still says so and fails.
    regressions.record(
        home,
        "qa_eval",
        train[0],
        "run0abcdef",
        [{"check": "qa_recall_regression", "severity": "ERROR", "description": "exact_recall 0.600 -> 0.400"}],
    )
    assert main(["eval", "--data", str(data), "--split", "train", "--json"]) == 1
    out = capsys.readouterr()
    assert f"standing regression of qa_eval on {train[0]} since run run0abcd" in out.err
    assert [e["partition"] for e in json.loads(out.out)["standing_regressions"]] == [train[0]]
    assert main(["baseline", "pin", "--data", str(data), "--chat", train[0], "--asset", "qa_eval", "--json"]) == 0
    capsys.readouterr()
    assert main(["eval", "--data", str(data), "--split", "train", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["standing_regressions"] == []
