"""Staleness and Declarative Automation: a config change requests exactly what reads it."""

import re

import dagster as dg
import pytest
from chat_factory import small_chat, write_chat
from dagster._core.definitions.observe import observe

from assets.config_sources import CONFIG_SOURCES
from definitions import build_definitions
from jobs.runner import Runner
from narrative_mirror import settings
from resources import default_resources

LAYERS = ["message_embeddings", "l1_topics", "l15_signals", "l2_threads", "lancedb_index"]
KEY = "chat_a"  # not in split.toml: counts as train


def _override(folder, name, pattern, replacement):
    text = settings.config_path(name).read_text()
    new, n = re.subn(pattern, replacement, text, flags=re.M)
    assert n == 1, (name, pattern)
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.toml").write_text(new)


def _requested(defs, instance, cursor):
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor)
    return {r.key.to_user_string() for r in result.results if r.true_subset.size}, result.cursor


@pytest.fixture
def built(tmp_path, monkeypatch):
    data = tmp_path / "data"
    write_chat(data, KEY, small_chat())
    monkeypatch.setenv("NM_DATA_DIR", str(data))
    with dg.instance_for_test() as instance:
        resources = default_resources(data_dir=str(data))
        defs = build_definitions(resources)
        instance.add_dynamic_partitions("chat_files", [KEY])
        observe(CONFIG_SOURCES, instance=instance)
        result = dg.materialize(list(defs.assets), selection=["messages", "gold_qa", "arc_cases", *LAYERS, "qa_eval", "arc_eval"],
                                partition_key=KEY, instance=instance, resources=resources)
        assert result.success
        yield defs, instance, resources


def test_config_changes_request_only_what_reads_them(built, tmp_path, monkeypatch):
    defs, instance, _ = built
    requested, cursor = _requested(defs, instance, None)
    requested, cursor = _requested(defs, instance, cursor)
    assert "message_embeddings" not in requested and "l1_topics" not in requested

    # The reranker settings: only the evaluation side, never embeddings or layers.
    _override(tmp_path / "cfg", "retrieval", r"^w_rec = [0-9.]+", "w_rec = 0.3")
    monkeypatch.setenv("NM_CONFIG_DIR", str(tmp_path / "cfg"))
    observe(CONFIG_SOURCES, instance=instance)
    requested, cursor = _requested(defs, instance, cursor)
    assert requested == {"qa_eval", "arc_eval"}

    # L1 parameters: L1 (and, once it has new output, what depends on it); not the embeddings.
    _override(tmp_path / "cfg", "layers", r"^min_block_messages = \d+", "min_block_messages = 2")
    observe(CONFIG_SOURCES, instance=instance)
    requested, cursor = _requested(defs, instance, cursor)
    assert "l1_topics" in requested and "l2_threads" in requested
    assert "message_embeddings" not in requested and "messages" not in requested


def test_identical_output_keeps_downstream_fresh(built):
    defs, instance, resources = built
    runner = Runner.__new__(Runner)  # reuse its staleness logic on this test instance
    runner.instance, runner.asset_graph = instance, defs.resolve_asset_graph()
    order = runner._ordered(["message_embeddings", "l1_topics", "l15_signals", "l2_threads", "lancedb_index"])
    assert runner._needs_run(order, KEY) == []
    again = dg.materialize(list(defs.assets), selection=["l1_topics"], partition_key=KEY, instance=instance,
                           resources=resources)
    assert again.success
    # Same blocks -> same data version -> nothing downstream (nor the embeddings) turns stale.
    assert runner._needs_run(order, KEY) == []


def test_test_partitions_are_never_automated(built):
    defs, instance, resources = built
    instance.add_dynamic_partitions("chat_files", ["Chat_9_Fahim_Akib"])
    requested, cursor = _requested(defs, instance, None)
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor)
    for r in result.results:
        if r.key.to_user_string() in ("qa_eval", "arc_eval") and r.true_subset.size:
            assert "Chat_9_Fahim_Akib" not in r.true_subset.expensively_compute_partition_keys()
