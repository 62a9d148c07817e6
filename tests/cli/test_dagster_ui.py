"""Issue #28 item 2 and issue #30 item 2 through the command line on a real Dagster instance
(real LanceDB, real embedder, one demo chat): named jobs, data-quality checks on the layers,
described checks with rounded values, tables as table metadata, one experiment-log row per
change, and a summary-prompt edit that leaves the evaluations up to date and current."""

import json
import shutil

import dagster as dg
import pytest

from cli.main import main
from definitions import build_definitions
from instance.lifecycle import dagster_home
from narrative_mirror import experiments, settings
from resources import environment

GARDEN = "demo_garden_Mara_Theo"  # a train chat file
DATA_QUALITY = {
    ("l1_topics", "every_message_in_one_block"),
    ("l2_threads", "no_empty_thread"),
    ("lancedb_index", "vectors_for_every_message"),
}


@pytest.fixture
def data(tmp_path):
    (tmp_path / "chats").mkdir()
    (tmp_path / "chats_arcs").mkdir()
    shutil.copy(settings.DEMO_DATA_DIR / f"{GARDEN}.json", tmp_path / "chats")
    shutil.copy(settings.DEMO_ARCS_DIR / f"{GARDEN}.arcs.json", tmp_path / "chats_arcs")
    return tmp_path / "chats"


def _eval(capsys, data) -> tuple[dict, str]:
    assert main(["eval", "--data", str(data), "--split", "train", "--json"]) == 0
    out = capsys.readouterr()
    return json.loads(out.out), out.err


def _summary_log() -> list[dict]:
    return [
        r
        for r in experiments.read(environment.nm_home() / "experiments" / "experiments.jsonl")
        if r["kind"] == "summary"
    ]


def test_every_check_of_the_definitions_has_a_description():
    specs = [
        spec
        for asset in build_definitions().assets
        if isinstance(asset, dg.AssetsDefinition)
        for spec in asset.check_specs
    ]
    assert {(s.asset_key.to_user_string(), s.name) for s in specs} >= DATA_QUALITY | {
        ("qa_eval", "qa_recall_regression"),
        ("arc_eval", "arc_recall_floor"),
    }
    assert [s.name for s in specs if not s.description] == []


@pytest.mark.e2e
def test_the_ui_reads_named_jobs_checks_tables_and_one_log_row_per_change(data, tmp_path, monkeypatch, capsys):
    first, _ = _eval(capsys, data)
    assert first["chat_files"] == [GARDEN] and first["failures"] == []
    with dg.DagsterInstance.from_config(str(dagster_home())) as instance:
        runs = instance.get_runs()
        assert {r.job_name for r in runs} == {"memory_job", "train_eval_job", "eval_summary_job"}
        for asset, check in DATA_QUALITY:
            record = instance.get_latest_asset_check_evaluation_record(dg.AssetCheckKey(dg.AssetKey(asset), check))
            evaluation = record.event.dagster_event.event_specific_data
            assert evaluation.passed, (asset, check)
        qa = instance.fetch_materializations(dg.AssetKey("qa_eval"), limit=1).records[0].asset_materialization.metadata
        per_category = qa["per_category"]
        assert isinstance(per_category, dg.TableMetadataValue)
        assert per_category.records[0].data["category"] == "all" and per_category.records[0].data["questions"] == 18
        assert all(
            v is None or v == round(v, 3) for r in per_category.records for v in r.data.values() if isinstance(v, float)
        )
        summary = (
            instance.fetch_materializations(dg.AssetKey("eval_summary"), limit=1)
            .records[0]
            .asset_materialization.metadata
        )
        assert isinstance(summary["train/per_category"], dg.TableMetadataValue)
        log_table = summary["experiment_log"]
        assert isinstance(log_table, dg.TableMetadataValue) and len(log_table.records) == 1
        assert log_table.records[0].data["changed"] == "(first experiment)"
    (logged,) = _summary_log()
    assert logged["config"]["code:qa_eval"] and logged["config"]["code:arc_eval"]

    # The same evaluation again: nothing runs, and the experiment log gains no row.
    again, err = _eval(capsys, data)
    assert "evaluation up to date" in err
    assert len(_summary_log()) == 1

    # A summary prompt edited (Dagster: the evaluations stay fresh, offline summaries unchanged):
    # `eval` says up to date, and the summary still counts the chat file under the current config.
    (tmp_path / "config" / "prompts").mkdir(parents=True)
    (tmp_path / "config" / "prompts" / "block_summary.txt").write_text(
        settings.load_prompt("block_summary") + "\nName the people involved.\n"
    )
    monkeypatch.setenv("NM_CONFIG_DIR", str(tmp_path / "config"))
    edited, err = _eval(capsys, data)
    assert f"{GARDEN}: evaluation up to date" in err
    assert edited["fingerprint"] == first["fingerprint"] and edited["recall@10"] == first["recall@10"]
    with dg.DagsterInstance.from_config(str(dagster_home())) as instance:
        summary = (
            instance.fetch_materializations(dg.AssetKey("eval_summary"), limit=1)
            .records[0]
            .asset_materialization.metadata
        )
        assert summary["outdated_partitions"].value == [] and summary["train/recall@10"].value == round(
            first["recall@10"], 3
        )
        assert "__ephemeral_asset_job__" not in {r.job_name for r in instance.get_runs()}
    assert len(_summary_log()) == 1

    # `baseline pin` accepts the latest evaluations as the baselines; `baseline show` lists them.
    assert main(["baseline", "pin", "--json"]) == 0
    pinned = json.loads(capsys.readouterr().out)
    assert pinned["pinned"] == [f"qa_eval/{GARDEN}", f"arc_eval/{GARDEN}"]
    pins = json.loads(open(pinned["pins_file"]).read())
    assert set(pins) == {"qa_eval", "arc_eval"} and pins["qa_eval"][GARDEN]["metrics"]["recall@10"] == pytest.approx(
        first["recall@10"], abs=1e-3
    )
    assert main(["baseline", "show", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["per_file"]
    assert shown[f"qa_eval/{GARDEN}"]["recall@10"] == round(first["recall@10"], 3)
