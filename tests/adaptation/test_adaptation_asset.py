"""The adapted_embedder asset on a real Dagster instance: a retrain makes the message vectors
(and, through them, the layers) stale by the freshness rule and nothing upstream; a run with
nothing due keeps the adaptation and leaves everything fresh."""

from __future__ import annotations

import os

import dagster as dg
import pytest
from chat_factory import small_chat, write_chat
from home_instance import home_instance

from assets.freshness import FreshnessQuery
from assets.sources.assets import observe_sources, record_observation
from cli.session import INGEST, LAYERS
from definitions import build_definitions
from resources.dagster_resources import default_resources

KEY = "chat_a"


def _observe(instance, resources):
    record_observation(instance, observe_sources(instance, resources["chat_data"]))


def _requested(defs, instance):
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    return {r.key.to_user_string() for r in result.results if r.true_subset.size}


def _materialize(defs, instance, resources, selection, **kwargs):
    return dg.materialize(list(defs.assets), selection=selection, instance=instance, resources=resources, **kwargs)


@pytest.mark.slow
def test_a_retrain_makes_the_vectors_stale_and_nothing_upstream(tmp_path, monkeypatch, adaptation_on):
    data = tmp_path / "data"
    write_chat(data, KEY, small_chat())
    monkeypatch.setenv("NM_DATA_DIR", str(data))
    with home_instance() as instance:
        resources = default_resources(data_dir=str(data), nm_home=os.environ["NM_HOME"])
        defs = build_definitions(resources)
        _observe(instance, resources)
        assert _materialize(defs, instance, resources, [*INGEST, *LAYERS], partition_key=KEY).success
        assert _requested(defs, instance) == set()  # not automated: the job or the sensor runs it
        graph = defs.resolve_asset_graph()
        assert FreshnessQuery(instance, graph).needing_run(dg.AssetKey("message_embeddings"), [KEY]) == {}

        trained = _materialize(
            defs,
            instance,
            resources,
            ["adapted_embedder"],
            run_config={"ops": {"adapted_embedder": {"config": {"force": True}}}},
        )
        fingerprint = trained.asset_materializations_for_node("adapted_embedder")[0].metadata["fingerprint"].value
        assert (tmp_path / "nm_home" / "adaptation" / fingerprint / "top_layers.pt").is_file()
        _observe(instance, resources)
        query = FreshnessQuery(instance, graph)
        stale = {name: r for name in [*INGEST, *LAYERS] if (r := query.reason(dg.AssetKey(name), KEY))}
        assert stale == {"message_embeddings": "embedding_config has a new data version"}
        assert _requested(defs, instance) == {"message_embeddings"}

        encoded = _materialize(defs, instance, resources, ["message_embeddings"], partition_key=KEY)
        meta = encoded.asset_materializations_for_node("message_embeddings")[0].metadata
        assert meta["encoded_messages"].value == 8 and meta["reused_vectors"].value == 0
        assert _requested(defs, instance) == {"l1_topics", "l2_threads", "lancedb_index"}  # the readers of the vectors

        # Nothing due (same messages, no force): the adaptation is kept, embedding_config unmoved.
        kept = _materialize(defs, instance, resources, ["adapted_embedder"])
        assert kept.asset_materializations_for_node("adapted_embedder")[0].metadata["retrained"].value is False
        _observe(instance, resources)
        assert "message_embeddings" not in _requested(defs, instance)
