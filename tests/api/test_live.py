"""POST /api/chats/{chat}/messages on a real app, a real LanceDB and the real embedder: added
messages are found by dense and full-text search at once, in this app and in a second one over
the same store; duplicates store nothing; tokens need the add right in the chat's scope."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pytest
from memory_api_chat import CHAT, build_retriever
from starlette.testclient import TestClient

from api.access import add_token, load_tokens
from api.app import create_app
from api.live import mount_live
from narrative_mirror.events.writer import EventLog
from narrative_mirror.live.memory import LiveMemory
from narrative_mirror.retrieval.engine import Retriever

LOCAL = "http://localhost"
HERON = {
    "id": "m1",
    "author": "Ada",
    "text": "A grey heron built its nest beside the old watermill.",
    "timestamp": "2025-03-01T10:00:00+01:00",
}
BINOCULARS = {
    "author": "Bo",
    "text": "Bring the binoculars on Saturday, the zygodactyl woodpecker is back.",
    "timestamp": "2025-03-01T09:05:00Z",
    "reply_to": "m1",
}


@pytest.fixture(scope="module")
def store_folder(embedder, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("live")
    build_retriever(folder / "lancedb", embedder)  # a file-backed chat (CHAT) in the same store
    return folder


@contextmanager
def live_client(store_folder: Path, embedder, folder: Path, **kwargs):
    """An app over the shared store with the live routes; yields (client, retriever)."""
    from narrative_mirror.index_store import IndexStore

    retriever = Retriever(IndexStore(str(store_folder / "lancedb")), embedder)
    app = create_app(retriever, EventLog(folder / "events"), runs_root=folder / "runs", **kwargs)
    mount_live(
        app,
        app.state.api,
        LiveMemory(store_folder / "live", retriever.store, embedder, on_indexed=retriever.invalidate),
    )
    with TestClient(app, base_url=LOCAL, raise_server_exceptions=False) as client:
        yield client, retriever


def search(client, chat: str, q: str, variant: str, headers=None) -> list[str]:
    response = client.get(
        "/api/memory/search", params={"chat": chat, "q": q, "k": 3, "variant": variant}, headers=headers or {}
    )
    assert response.status_code == 200, response.text
    return [hit["id"] for hit in response.json()["hits"]]


def test_added_messages_are_found_at_once_here_and_by_a_second_app(store_folder, embedder, tmp_path):
    with (
        live_client(store_folder, embedder, tmp_path / "a") as (client, _),
        live_client(store_folder, embedder, tmp_path / "b") as (second, _),
    ):
        assert second.get("/api/health").json()["chats"] == [CHAT]  # read before the chat exists
        added = client.post("/api/chats/birds_Ada_Bo/messages", json={"messages": [HERON, BINOCULARS]})
        assert added.status_code == 200, added.text
        body = added.json()
        assert (body["ids"], body["stored"], body["duplicates"], body["created"], body["indexed"]) == (
            ["m1", "L1"],
            ["m1", "L1"],
            [],
            True,
            2,
        )
        assert search(client, "birds_Ada_Bo", "where does the heron nest", "dense")[0] == "m1"
        assert search(client, "birds_Ada_Bo", "zygodactyl", "bm25") == ["L1"]
        assert search(second, "birds_Ada_Bo", "zygodactyl", "bm25") == ["L1"]  # the second app reads the chat now
        hits = client.get("/api/memory/search", params={"chat": "birds_Ada_Bo", "q": "heron nest", "k": 1}).json()[
            "hits"
        ]
        assert hits[0]["timestamp"] == "2025-03-01T09:00:00" and hits[0]["speaker"] == "Ada"  # stored in UTC
        # the same batch again stores nothing
        again = client.post("/api/chats/birds_Ada_Bo/messages", json={"messages": [HERON, BINOCULARS]}).json()
        assert (again["stored"], again["duplicates"], again["indexed"]) == ([], ["m1", "L1"], 0)
        third = client.post(
            "/api/chats/birds_Ada_Bo/messages",
            json={
                "messages": [
                    {
                        "author": "Ada",
                        "text": "The kingfisher returned to the millrace.",
                        "timestamp": "2025-03-02T08:00:00Z",
                    }
                ]
            },
        )
        assert third.json()["stored"] == ["L2"]
        assert search(client, "birds_Ada_Bo", "kingfisher millrace", "bm25")[0] == "L2"
        # the second app, which read the chat before the last add, finds the new message at once
        assert search(second, "birds_Ada_Bo", "kingfisher millrace", "dense")[0] == "L2"
    assert len((store_folder / "live" / "birds_Ada_Bo.jsonl").read_text().splitlines()) == 3


def test_bad_batches_and_a_file_backed_name_are_refused(store_folder, embedder, tmp_path):
    with live_client(store_folder, embedder, tmp_path) as (client, _):
        bad = client.post("/api/chats/notes_Ada/messages", json={"messages": [{**HERON, "timestamp": "soon"}]})
        assert bad.status_code == 400 and bad.json()["error"]["field"] == "messages[0].timestamp"
        assert client.post("/api/chats/notes_Ada/messages", json={"items": []}).status_code == 400
        assert (
            client.post("/api/chats/bad..name/messages", json={"messages": [HERON]}).json()["error"]["field"] == "chat"
        )
        clash = client.post(f"/api/chats/{CHAT}/messages", json={"messages": [HERON]})
        assert clash.status_code == 409 and clash.json()["error"]["field"] == "chat"
        assert not (store_folder / "live" / "notes_Ada.jsonl").exists()
        assert not (store_folder / "live" / f"{CHAT}.jsonl").exists()


def test_a_token_adds_only_where_it_has_the_add_right(store_folder, embedder, tmp_path):
    path = tmp_path / "tokens.json"
    writer = {"Authorization": f"Bearer {add_token(path, 'writer', ['team_*'], ['read', 'add'])}"}
    reader = {"Authorization": f"Bearer {add_token(path, 'reader', ['*'])}"}  # default rights: read
    with live_client(store_folder, embedder, tmp_path, tokens=load_tokens(path)) as (client, _):
        ok = client.post("/api/chats/team_alpha/messages", json={"messages": [HERON]}, headers=writer)
        assert ok.status_code == 200 and ok.json()["stored"] == ["m1"]
        assert search(client, "team_alpha", "heron", "bm25", headers=writer) == ["m1"]
        refusals = [
            client.post("/api/chats/team_alpha/messages", json={"messages": [BINOCULARS]}, headers=reader),
            client.post("/api/chats/birds_Ada_Bo/messages", json={"messages": [BINOCULARS]}, headers=writer),
            client.post(f"/api/chats/{CHAT}/messages", json={"messages": [BINOCULARS]}, headers=writer),
            client.post("/api/chats/no_such_chat/messages", json={"messages": [BINOCULARS]}, headers=writer),
        ]
        # existing or not, live or file-backed: the same refusal, naming no chat
        assert {(r.status_code, r.text) for r in refusals} == {
            (403, '{"error":{"field":"chat","message":"this API token may not add messages to that chat"}}')
        }
        assert client.post("/api/chats/team_alpha/messages", json={"messages": [HERON]}).status_code == 401
    assert not (store_folder / "live" / "no_such_chat.jsonl").exists()
    assert [line.count('"m1"') for line in (store_folder / "live" / "team_alpha.jsonl").read_text().splitlines()] == [1]


def files_holding(folder: Path, needle: bytes) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes())


def test_forget_removes_the_text_from_the_log_and_the_index(store_folder, embedder, tmp_path):
    sentinel = "qvx7sentinelwombat"
    path = tmp_path / "tokens.json"
    owner = {"Authorization": f"Bearer {add_token(path, 'owner', ['diary_*'], ['read', 'add', 'forget'])}"}
    adder = {"Authorization": f"Bearer {add_token(path, 'adder', ['*'], ['read', 'add'])}"}
    with live_client(store_folder, embedder, tmp_path, tokens=load_tokens(path)) as (client, _):
        client.post(
            "/api/chats/diary_Ada/messages",
            headers=owner,
            json={
                "messages": [
                    {
                        "id": "d1",
                        "author": "Ada",
                        "text": "Lunch with Bo at the harbour.",
                        "timestamp": "2025-04-01T12:00:00Z",
                    },
                    {
                        "id": "d2",
                        "author": "Ada",
                        "text": f"My locker code is {sentinel}.",
                        "timestamp": "2025-04-01T13:00:00Z",
                    },
                ]
            },
        )
        assert search(client, "diary_Ada", sentinel, "bm25", headers=owner) == ["d2"]
        assert files_holding(store_folder, sentinel.encode())
        for who, chat, status in ((adder, "diary_Ada", 403), (owner, "team_alpha", 403), (owner, "diary_Ada", 200)):
            response = client.delete(f"/api/chats/{chat}/messages/d2", headers=who)
            assert response.status_code == status, response.text
        report = response.json()
        assert report["removed"]["live_log"] == {"messages": 1} and report["removed"]["index"]["messages_rows"] == 1
        assert client.delete("/api/chats/diary_Ada/messages/d2", headers=owner).status_code == 404
        assert search(client, "diary_Ada", sentinel, "bm25", headers=owner) == []
        assert search(client, "diary_Ada", "lunch harbour", "dense", headers=owner) == ["d1"]
    assert files_holding(store_folder, sentinel.encode()) == []  # log, tables, full-text index, old versions


def test_health_stays_ok_after_a_whole_chat_is_forgotten(store_folder, embedder, tmp_path):
    with live_client(store_folder, embedder, tmp_path) as (client, _):
        client.post(
            "/api/chats/errands_Ada/messages",
            json={
                "messages": [
                    {"author": "Ada", "text": "Buy lightbulbs and oat milk.", "timestamp": "2025-05-01T09:00:00Z"}
                ]
            },
        )
        before = client.get("/api/health").json()
        assert before["status"] == "ok" and "errands_Ada" in before["chats"]
        assert client.delete("/api/chats/errands_Ada").status_code == 200
        after = client.get("/api/health").json()
        assert (after["status"], after.get("problems")) == ("ok", None)  # forgotten on purpose, not lost
        assert "errands_Ada" not in after["chats"]
        assert client.get("/api/memory/search", params={"chat": "errands_Ada", "q": "oat milk"}).status_code == 404
