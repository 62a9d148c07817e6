import dagster as dg
from chat_factory import small_chat, write_chat

from jobs.ingest import chat_files_sensor
from resources import ChatDataResource


def _run(instance, data, cursor=None):
    ctx = dg.build_sensor_context(instance=instance, resources={"chat_data": ChatDataResource(data_dir=str(data))})
    return chat_files_sensor(ctx)


def test_sensor_registers_new_files_and_requests_their_ingestion(tmp_path):
    data = tmp_path / "data"
    write_chat(data, "chat_a", small_chat())
    write_chat(data, "chat_b", small_chat(qa=False))
    (data / "chat_a.arcs.json").write_text("{}")
    (data / "bad,name.json").write_text("{}")
    with dg.instance_for_test() as instance:
        result = _run(instance, data)
        assert [r.partition_key for r in result.run_requests] == ["chat_a", "chat_b"]
        assert result.dynamic_partitions_requests[0].partition_keys == ["chat_a", "chat_b"]


def test_changed_file_gets_a_new_run_key_unchanged_keeps_it(tmp_path):
    data = tmp_path / "data"
    path = write_chat(data, "chat_a", small_chat())
    with dg.instance_for_test() as instance:
        first = _run(instance, data).run_requests[0].run_key
        assert _run(instance, data).run_requests[0].run_key == first
        path.write_text(path.read_text().replace("bakery", "bakehouse"))
        assert _run(instance, data).run_requests[0].run_key != first


def test_removed_file_keeps_its_partition(tmp_path):
    data = tmp_path / "data"
    path = write_chat(data, "chat_a", small_chat())
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("chat_files", ["chat_a"])
        path.unlink()
        result = _run(instance, data)
        assert result.run_requests == [] and result.dynamic_partitions_requests == []
        assert instance.get_dynamic_partitions("chat_files") == ["chat_a"]
