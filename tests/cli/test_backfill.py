"""The test evaluation backfill selects exactly the test chat files and tags its runs."""

import json

import dagster as dg
import pytest

from cli.main import main
from instance.lifecycle import dagster_home


@pytest.mark.e2e
def test_backfill_test_queues_exactly_the_test_partitions(realtalk_dir, capsys):
    assert main(["backfill-test", "--data", str(realtalk_dir), "--launch", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    expected = ["Chat_10_Fahim_Muhhamed", "Chat_8_Akib_Muhhamed", "Chat_9_Fahim_Akib"]
    assert out["test_partitions"] == expected and out["launched"]
    instance = dg.DagsterInstance.from_config(str(dagster_home()))
    (backfill,) = instance.get_backfills()
    assert sorted(backfill.partition_names) == expected
    runs = [r for r in instance.get_runs() if r.job_name == "test_eval_job"]
    assert sorted(r.tags["dagster/partition"] for r in runs) == expected
    assert {r.tags["narrative_mirror/eval_split"] for r in runs} == {"test"}


def test_eval_refuses_test_split_without_allow_test(realtalk_dir, capsys):
    assert main(["eval", "--data", str(realtalk_dir), "--split", "test"]) == 2
    assert "--allow-test" in capsys.readouterr().err
