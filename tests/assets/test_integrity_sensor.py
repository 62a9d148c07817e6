"""The daemon runs the integrity check: ``integrity_sensor`` on the real instance a command built
finds a damaged parquet output and lost index rows, sets the damaged file aside and requests the
rebuild of what is damaged with everything after it (real Dagster, LanceDB, embedder)."""

import json
import os
from pathlib import Path

import dagster as dg
from chat_factory import small_chat, write_chat
from home_instance import home_instance

from cli.main import main
from definitions import build_definitions
from jobs.integrity import integrity_sensor
from narrative_mirror.index_store import IndexStore
from resources.dagster_resources import default_resources

CHAT = "tiny"
AFTER_TOPICS = ["l1_topics", "l15_signals", "l2_threads", "lancedb_index"]


def evaluate(instance, data: Path):
    resources = default_resources(data_dir=str(data))
    with dg.build_sensor_context(
        instance=instance,
        definitions=build_definitions(resources),
        resources={"lancedb": resources["lancedb"], "state": resources["state"]},
    ) as context:
        return integrity_sensor(context)


def test_the_sensor_requests_the_rebuild_of_what_is_damaged(tmp_path, capsys):
    data = tmp_path / "data"
    write_chat(data, CHAT, small_chat())
    assert main(["build", "--data", str(data), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["repairs"] == []
    home = Path(os.environ["NM_HOME"])
    with home_instance() as instance:
        healthy = evaluate(instance, data)
        assert isinstance(healthy, dg.SkipReason) and "every materialized output is whole" in healthy.skip_message

        topics = home / "storage" / "l1_topics" / f"{CHAT}.parquet"
        whole = topics.read_bytes()
        with topics.open("r+b") as f:
            f.truncate(topics.stat().st_size // 2)
        [request] = evaluate(instance, data)
        assert request.partition_key == CHAT
        assert [k.to_user_string() for k in request.asset_selection] == AFTER_TOPICS
        assert (
            request.tags["narrative_mirror/repair"] == "l1_topics output not a whole parquet file (no PAR1 at its end)"
        )
        assert topics.with_name(f"{CHAT}.parquet.corrupt").exists() and not topics.exists()

        IndexStore(str(home / "lancedb")).drop("messages")  # the index lost the chat's rows
        topics.write_bytes(whole)  # (only the index is damaged now)
        [request] = evaluate(instance, data)
        assert [k.to_user_string() for k in request.asset_selection] == ["lancedb_index"]
        assert request.tags["narrative_mirror/repair"] == "lancedb rows missing (0 of 8 in messages)"
