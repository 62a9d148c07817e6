"""source_files_sensor: registers chat files and records changed source versions, never runs."""

import dagster as dg
from chat_factory import small_chat, write_chat
from home_instance import home_instance

from assets.versioning import DATA_VERSION_TAG
from jobs.sources import source_files_sensor
from resources.dagster_resources import ChatDataResource


def _tick(instance, data):
    """One sensor tick, its observations recorded as the daemon would."""
    ctx = dg.build_sensor_context(instance=instance, resources={"chat_data": ChatDataResource(data_dir=str(data))})
    result = source_files_sensor(ctx)
    for request in result.dynamic_partitions_requests:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    for event in result.asset_events:
        instance.report_runless_asset_event(event)
    return result


def _observed(result, asset):
    return {e.partition: e.tags[DATA_VERSION_TAG] for e in result.asset_events if e.asset_key == dg.AssetKey(asset)}


def test_new_files_become_partitions_with_their_versions_and_no_run(tmp_path):
    data = tmp_path / "data"
    write_chat(data, "chat_a", small_chat())
    write_chat(data, "chat_b", small_chat(qa=False))
    (data / "chat_a.arcs.json").write_text("{}")
    (data / "bad,name.json").write_text("{}")
    with home_instance() as instance:
        result = _tick(instance, data)
        assert result.run_requests == []
        assert result.dynamic_partitions_requests[0].partition_keys == ["chat_a", "chat_b"]
        chats = _observed(result, "chat_file")
        assert set(chats) == {"chat_a", "chat_b"} and chats["chat_a"] != chats["chat_b"]
        assert _observed(result, "arc_file")["chat_b"] == "absent"
        assert dg.AssetKey(["prompts", "agent_planner"]) in {e.asset_key for e in result.asset_events}
        assert dg.AssetKey("retrieval_config") in {e.asset_key for e in result.asset_events}


def test_only_changed_files_are_observed_again(tmp_path):
    data = tmp_path / "data"
    path = write_chat(data, "chat_a", small_chat())
    write_chat(data, "chat_b", small_chat())
    with home_instance() as instance:
        first = _observed(_tick(instance, data), "chat_file")
        assert _tick(instance, data).asset_events == []  # nothing changed: nothing recorded
        path.touch()
        assert _tick(instance, data).asset_events == []  # touched, same content
        path.write_text(path.read_text().replace("bakery", "bakehouse"))
        changed = _tick(instance, data)
        assert list(_observed(changed, "chat_file")) == ["chat_a"]
        assert _observed(changed, "chat_file")["chat_a"] != first["chat_a"]
        assert [e.asset_key for e in changed.asset_events] == [dg.AssetKey("chat_file")]


def test_removed_file_keeps_its_partition(tmp_path):
    data = tmp_path / "data"
    path = write_chat(data, "chat_a", small_chat())
    with home_instance() as instance:
        _tick(instance, data)
        path.unlink()
        result = _tick(instance, data)
        assert result.run_requests == [] and result.dynamic_partitions_requests == [] and result.asset_events == []
        assert instance.get_dynamic_partitions("chat_files") == ["chat_a"]
