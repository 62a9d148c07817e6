"""The LanceDB maintenance job on a store the command line built (real Dagster, real LanceDB)."""

import os

import dagster as dg
from chat_factory import small_chat, write_chat

from cli.main import main
from jobs.index import index_maintenance_job, index_maintenance_schedule
from narrative_mirror.index_store import IndexStore
from resources.dagster_resources import LanceDBResource, StateResource


def test_maintenance_job_compacts_and_indexes_what_builds_wrote(tmp_path):
    for i in range(3):
        chat = small_chat()
        chat["session_1"][0]["clean_text"] = f"I start my new job at bakery number {i} tomorrow"
        write_chat(tmp_path / "data", f"chat_{i}", chat)
    assert main(["build", "--data", str(tmp_path / "data")]) == 0
    store = IndexStore(str(tmp_path / "nm_home" / "lancedb"))
    before = store.health()
    assert before["messages"]["fragments"] == 3 and before["messages"]["unindexed_rows"] == 16
    hits = [mid for mid, _ in store.full_text_search("messages", "chat_2", "bakery", 10)]

    state = StateResource(home=os.environ["NM_HOME"])
    result = index_maintenance_job.execute_in_process(resources={"lancedb": LanceDBResource(state=state)})
    assert result.success
    after = store.health()
    assert after["messages"]["fragments"] <= 2 and after["messages"]["unindexed_rows"] == 0
    assert after["messages"]["rows"] == before["messages"]["rows"] == 24
    # same rows found (BM25 scores move a little: the index's statistics now cover every row)
    assert [mid for mid, _ in store.full_text_search("messages", "chat_2", "bakery", 10)] == hits
    metadata = result.output_for_node("maintain_index")
    assert metadata["after"]["blocks"]["unindexed_rows"] == 0
    assert index_maintenance_schedule.job_name == "index_maintenance_job"
    assert index_maintenance_schedule.default_status == dg.DefaultScheduleStatus.RUNNING
