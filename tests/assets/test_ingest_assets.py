"""Ingestion assets on a real Dagster instance."""

from __future__ import annotations

import dagster as dg
from chat_factory import small_chat, write_chat
from home_instance import home_instance

from assets.ingest.assets import INGEST_ASSETS, split
from assets.sources.assets import SOURCES
from resources.dagster_resources import default_resources


def _materialize(instance, data_dir, key, tmp_path, raise_on_error=True):
    return dg.materialize(
        [*SOURCES, *INGEST_ASSETS],
        partition_key=key,
        instance=instance,
        resources=default_resources(data_dir=str(data_dir), nm_home=str(tmp_path / "home")),
        raise_on_error=raise_on_error,
    )


def test_ingest_assets_materialize_one_partition(tmp_path):
    data = tmp_path / "data"
    write_chat(data, "chat_a", small_chat())
    with home_instance() as instance:
        instance.add_dynamic_partitions("chat_files", ["chat_a"])
        result = _materialize(instance, data, "chat_a", tmp_path)
        assert result.success
        msgs = result.asset_value("messages")
        assert msgs["local_id"].to_list() == ["D1:1", "D1:2", "D1:3", "D1:4", "D2:1", "D2:2", "D2:3", "D2:4"]
        qa = result.asset_value("gold_qa")
        assert qa["gold_ids"].to_list() == [["D1:1", "D1:3"], ["D2:3"]]
        assert qa["unresolved"].to_list() == [[], ["D9:9"]]
        mat = instance.fetch_materializations(dg.AssetKey("gold_qa"), limit=1).records[0].asset_materialization
        assert mat.partition == "chat_a"
        assert mat.metadata["unresolved_evidence"].value == 1
        checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
        assert {name: c.passed for name, c in checks.items()} == {
            "unresolved_gold_share": False,
            "gold_oddities": False,
        }
        assert {c.severity for c in checks.values()} == {dg.AssetCheckSeverity.WARN}
        assert mat.metadata["gold_oddities"].value == {"chat_a/q001": ["not in the chat: D9:9"]}
        assert result.asset_value("arc_cases").height == 0


def test_chat_without_qa_is_ingested_with_no_questions(tmp_path):
    data = tmp_path / "data"
    write_chat(data, "chat_b", small_chat(qa=False))
    with home_instance() as instance:
        instance.add_dynamic_partitions("chat_files", ["chat_b"])
        result = _materialize(instance, data, "chat_b", tmp_path)
        assert result.asset_value("messages").height == 8
        assert result.asset_value("gold_qa").height == 0


def test_bad_file_fails_with_its_name_and_keeps_the_previous_output(tmp_path):
    data = tmp_path / "data"
    path = write_chat(data, "chat_c", small_chat())
    with home_instance() as instance:
        instance.add_dynamic_partitions("chat_files", ["chat_c"])
        _materialize(instance, data, "chat_c", tmp_path)
        stored = tmp_path / "home" / "storage" / "messages" / "chat_c.parquet"
        before = stored.read_bytes()
        path.write_text('{"session_1": [', encoding="utf-8")
        result = _materialize(instance, data, "chat_c", tmp_path, raise_on_error=False)
        assert not result.success
        failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
        data = failure.event_specific_data.user_failure_data  # a one-line input problem, no traceback
        assert data.description == "chat_c.json: invalid JSON at line 1 column 16: Expecting value"
        assert data.metadata["narrative_mirror/input_problem"].value is True
        assert stored.read_bytes() == before


def test_split_asset_assigns_each_chat_file_and_flags_unknown(tmp_path):
    keys = ["Chat_1_Emi_Elise", "Chat_9_Fahim_Akib", "mine"]
    with home_instance() as instance:
        instance.add_dynamic_partitions("chat_files", keys)
        rows = []
        for key in keys:
            result = dg.materialize(
                [*SOURCES, split],
                partition_key=key,
                instance=instance,
                resources=default_resources(nm_home=str(tmp_path / "home")),
            )
            rows += result.asset_value("split").rows()
        assert rows == [
            ("Chat_1_Emi_Elise", "train", True),
            ("Chat_9_Fahim_Akib", "test", True),
            ("mine", "train", False),
        ]
