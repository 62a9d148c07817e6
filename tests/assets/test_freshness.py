"""The freshness rule on a real instance: it agrees with Dagster's own "unsynced" resolver, and the
automation built on it requests exactly what an input change touches."""

import re

import dagster as dg
import pytest
from chat_factory import small_chat, write_chat
from home_instance import home_instance

from assets.freshness import FreshnessQuery
from assets.sources.assets import observe_sources, record_observation
from cli.session import INGEST, LAYERS
from definitions import build_definitions
from narrative_mirror import settings
from resources.dagster_resources import default_resources

KEY = "chat_a"  # not in split.toml: counts as train


def _override(folder, name, pattern, replacement, prompt=False):
    source = settings.prompt_path(name) if prompt else settings.config_path(name)
    new, n = re.subn(pattern, replacement, source.read_text(), flags=re.M)
    assert n == 1, (name, pattern)
    target = folder / "prompts" / f"{name}.txt" if prompt else folder / f"{name}.toml"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(new)


def _observe(instance, resources):
    record_observation(instance, observe_sources(instance, resources["chat_data"]))


def _requested(defs, instance, cursor=None):
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor)
    return {r.key.to_user_string() for r in result.results if r.true_subset.size}, result.cursor


class Built:
    def __init__(self, data, instance, resources, defs):
        self.data, self.instance, self.resources, self.defs = data, instance, resources, defs

    def materialize(self, selection, **kwargs):
        return dg.materialize(
            list(self.defs.assets),
            selection=selection,
            partition_key=KEY,
            instance=self.instance,
            resources=self.resources,
            **kwargs,
        )

    def reasons(self) -> dict[str, str]:
        query = FreshnessQuery(self.instance, self.defs.resolve_asset_graph())
        return {k.to_user_string(): r for k in self.partitioned() if (r := query.reason(k, KEY))}

    def oracle(self) -> set[str]:
        """Dagster's own resolver (internal API, used here only as the reference)."""
        resolver, fresh = self._resolver()
        return {k.to_user_string() for k in self.partitioned() if resolver.get_status(k, KEY) != fresh}

    def partitioned(self) -> list[dg.AssetKey]:
        """The per-chat assets (eval_summary, profile_protocol, ... aggregate over all chats)."""
        graph = self.defs.resolve_asset_graph()
        return [k for k in graph.materializable_asset_keys if graph.get(k).partitions_def is not None]

    def summary_unsynced(self) -> tuple[bool, bool]:
        """(ours, Dagster's) for eval_summary, the aggregate over every chat file."""
        resolver, fresh = self._resolver()
        key = dg.AssetKey("eval_summary")
        ours = FreshnessQuery(self.instance, self.defs.resolve_asset_graph()).reason(key, None) is not None
        return ours, resolver.get_status(key) != fresh

    def _resolver(self):
        from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
        from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
        from dagster._time import get_current_datetime

        graph = self.defs.resolve_asset_graph()
        view = AssetGraphView(
            temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
            instance=self.instance,
            asset_graph=graph,
        )
        return CachingStaleStatusResolver(self.instance, graph, view), StaleStatus.FRESH


@pytest.fixture
def built(tmp_path, monkeypatch):
    data = tmp_path / "data"
    write_chat(data, KEY, small_chat())
    monkeypatch.setenv("NM_DATA_DIR", str(data))
    with home_instance() as instance:
        resources = default_resources(data_dir=str(data), nm_home=str(tmp_path / "home"))
        defs = build_definitions(resources)
        _observe(instance, resources)
        built = Built(data, instance, resources, defs)
        assert built.materialize([*INGEST, *LAYERS, "qa_eval", "arc_eval"]).success
        assert dg.materialize(
            list(defs.assets), selection=["eval_summary"], instance=instance, resources=resources
        ).success
        yield built


def test_rule_agrees_with_dagsters_unsynced_status(built):
    assert built.reasons() == {} and built.oracle() == set()
    assert built.summary_unsynced() == (False, False)

    chat = built.data / f"{KEY}.json"
    chat.write_text(chat.read_text().replace("rye bread", "sourdough"))
    _observe(built.instance, built.resources)
    reasons = built.reasons()
    assert reasons == {"messages": "chat_file has a new data version", "gold_qa": "chat_file has a new data version"}
    assert set(reasons) == built.oracle()

    # One hop: the new messages make their direct readers unsynced, exactly as Dagster says.
    assert built.materialize(["messages"]).success
    assert (
        set(built.reasons())
        == built.oracle()
        == {
            "gold_qa",
            "arc_cases",
            "message_embeddings",
            "l1_topics",
            "l15_signals",
            "l2_threads",
            "lancedb_index",
            "qa_eval",
        }
    )

    # The file back as it was: nothing left to do for the chat file's readers.
    chat.write_text(chat.read_text().replace("sourdough", "rye bread"))
    _observe(built.instance, built.resources)
    assert built.materialize(["messages"]).success
    assert "gold_qa" not in built.reasons() and "gold_qa" not in built.oracle()

    # The aggregate over every chat file follows a new evaluation of any of them.
    assert built.summary_unsynced() == (False, False)
    assert built.materialize(["qa_eval"]).success
    assert built.summary_unsynced() == (True, True)


@pytest.mark.slow
def test_config_and_prompt_changes_request_only_what_reads_them(built, tmp_path, monkeypatch):
    defs, instance = built.defs, built.instance
    assert _requested(defs, instance)[0] == set()

    cfg = tmp_path / "cfg"
    monkeypatch.setenv("NM_CONFIG_DIR", str(cfg))
    # The reranker settings: only the evaluation side, never embeddings or layers; the summary
    # waits for the evaluations and follows them.
    _override(cfg, "retrieval", r"^w_rec = [0-9.]+", "w_rec = 0.3")
    _observe(instance, built.resources)
    assert _requested(defs, instance)[0] == {"qa_eval", "arc_eval"}
    assert built.materialize(["qa_eval", "arc_eval"]).success
    assert _requested(defs, instance)[0] == {"eval_summary"}
    assert dg.materialize(
        list(defs.assets), selection=["eval_summary"], instance=instance, resources=built.resources
    ).success

    # An agent prompt: the evaluations again, not L1/L2.
    _override(cfg, "agent_planner", r"\A", "Plan carefully.\n", prompt=True)
    _observe(instance, built.resources)
    assert _requested(defs, instance)[0] == {"qa_eval", "arc_eval"}
    assert built.materialize(["qa_eval", "arc_eval"]).success
    assert dg.materialize(
        list(defs.assets), selection=["eval_summary"], instance=instance, resources=built.resources
    ).success

    # The story segmentation prompt: only arc mode reads it, so only the ARC evaluation.
    _override(cfg, "agent_segment", r"\A", "Keep phases short.\n", prompt=True)
    _observe(instance, built.resources)
    assert _requested(defs, instance)[0] == {"arc_eval"}
    assert set(built.reasons()) == built.oracle() == {"arc_eval"}
    assert built.materialize(["arc_eval"]).success
    assert dg.materialize(
        list(defs.assets), selection=["eval_summary"], instance=instance, resources=built.resources
    ).success

    # The adaptation's training settings while it is off: the vectors do not change, nothing runs.
    _override(cfg, "embedding", r"^pair_cap = \d+", "pair_cap = 500")
    _observe(instance, built.resources)
    assert _requested(defs, instance)[0] == set()

    # The block summary prompt: L1 only (its output is unchanged offline, so the wave stops there).
    _override(cfg, "block_summary", r"\A", "Be brief.\n", prompt=True)
    _observe(instance, built.resources)
    assert _requested(defs, instance)[0] == {"l1_topics"}
    assert built.materialize(["l1_topics"]).success
    assert _requested(defs, instance)[0] == set()

    # L1 parameters: L1 and, in the same run, what reads it and the layers config; not the embeddings.
    _override(cfg, "layers", r"^min_block_messages = \d+", "min_block_messages = 2")
    _observe(instance, built.resources)
    assert _requested(defs, instance)[0] == {"l1_topics", "l15_signals", "l2_threads"}


def test_identical_output_keeps_downstream_fresh(built):
    assert built.materialize(["l1_topics"]).success
    # Same blocks -> same data version -> nothing downstream (nor the embeddings) turns unsynced.
    assert built.reasons() == {}
    assert _requested(built.defs, built.instance)[0] == set()


def test_failed_partition_is_retried_by_automation_only_once_its_input_changes(built):
    defs, instance = built.defs, built.instance
    chat = built.data / f"{KEY}.json"
    good = chat.read_text()
    chat.write_text('{"session_1": [')
    _observe(instance, built.resources)
    assert not built.materialize(["messages"], raise_on_error=False).success
    requested, cursor = _requested(defs, instance)
    assert "messages" not in requested  # the broken file is not retried every tick
    chat.write_text(good.replace("rye bread", "sourdough"))
    _observe(instance, built.resources)
    requested, cursor = _requested(defs, instance, cursor)
    assert {"messages", "gold_qa"} <= requested


def test_test_partitions_are_never_automated(built):
    built.instance.add_dynamic_partitions("chat_files", ["Chat_9_Fahim_Akib"])
    result = dg.evaluate_automation_conditions(defs=built.defs, instance=built.instance)
    for r in result.results:
        if r.key.to_user_string() in ("qa_eval", "arc_eval") and r.true_subset.size:
            assert "Chat_9_Fahim_Akib" not in r.true_subset.expensively_compute_partition_keys()
