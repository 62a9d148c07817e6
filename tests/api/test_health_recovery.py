"""Health tells the truth about the store: degraded while the index is gone, ok again once a build
has repaired it, without restarting the app (real build, LanceDB, embedder and app in-process)."""

import json
import os
import shutil
import time
from pathlib import Path

from chat_factory import small_chat, write_chat
from starlette.testclient import TestClient

from api.app import create_app
from cli.main import main
from narrative_mirror.events.writer import EventLog
from resources import runtime

CHAT = "tiny"
SEARCH = "/api/memory/search"
GONE = {
    "status": "degraded",
    "chats": [],
    "unavailable": {},
    "problems": ["index: no messages table (the store is missing or was never built)", f"{CHAT}: no rows in the index"],
}


def build(data: Path, capsys) -> dict:
    assert main(["build", "--data", str(data), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_health_is_degraded_while_the_store_is_gone_and_ok_after_the_repair(tmp_path, capsys):
    data = tmp_path / "data"
    write_chat(data, CHAT, small_chat())
    build(data, capsys)
    retriever = runtime.retriever(runtime.index_from_environment(), runtime.embedder())
    app = create_app(retriever, EventLog(tmp_path / "events"), runs_root=tmp_path / "runs")
    with TestClient(app, base_url="http://localhost") as client:
        assert client.get("/api/health").json() == {"status": "ok", "chats": [CHAT], "unavailable": {}}
        before = client.get(SEARCH, params={"q": "bakery", "chat": CHAT, "k": 2})
        assert before.status_code == 200 and len(before.json()["hits"]) == 2

        shutil.rmtree(Path(os.environ["NM_HOME"]) / "lancedb")
        assert client.get("/api/health").json() == GONE
        assert client.get(SEARCH, params={"q": "bakery", "chat": CHAT}).status_code == 404
        assert client.get("/api/health").json() == GONE  # still known as lost, not forgotten

        assert [r["reason"] for r in build(data, capsys)["repairs"]] == ["lancedb rows missing (0 of 8 in messages)"]
        assert client.get("/api/health").json() == {"status": "ok", "chats": [CHAT], "unavailable": {}}
        search = client.get(SEARCH, params={"q": "bakery", "chat": CHAT, "k": 2})
        assert search.status_code == 200  # the repaired index answers as before it was lost
        assert [h["id"] for h in search.json()["hits"]] == [h["id"] for h in before.json()["hits"]]


def test_health_is_degraded_while_the_event_store_refuses_writes_and_ok_once_it_accepts(tmp_path, capsys):
    data = tmp_path / "data"
    write_chat(data, CHAT, small_chat())
    build(data, capsys)
    not_a_folder = tmp_path / "events_file"
    not_a_folder.write_text("not a database")
    broken_log = EventLog(not_a_folder)
    retriever = runtime.retriever(runtime.index_from_environment(), runtime.embedder())
    with TestClient(
        create_app(retriever, broken_log, runs_root=tmp_path / "runs"), base_url="http://localhost"
    ) as client:
        assert client.get("/api/health").json()["status"] == "ok"
        search = client.get(SEARCH, params={"q": "bakery", "chat": CHAT})
        assert search.status_code == 200
        assert broken_log.flush() and broken_log.failures == 1
        for _ in range(2):  # still failing at the next check: not only "since the last check"
            health = client.get("/api/health").json()
            assert (health["status"], health["chats"]) == ("degraded", [CHAT])
            [problem] = health["problems"]
            assert problem.startswith("event log: the store refuses writes since ")
            assert problem.endswith("; 1 event(s) kept in the spool until it accepts them")
        not_a_folder.unlink()  # the store is usable again: the kept event is stored, no restart
        deadline = time.monotonic() + 20
        while client.get("/api/health").json()["status"] != "ok":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert broken_log.events()["event_id"].to_list() == [search.json()["meta"]["event_id"]]
