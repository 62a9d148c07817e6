from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from memory_api_chat import CHAT, build_retriever
from starlette.testclient import TestClient

from narrative_mirror.api_server import create_app, serve
from narrative_mirror.events import EventLog

SEARCH = "/api/memory/search"


@pytest.fixture(scope="module")
def setup(embedder, tmp_path_factory):
    """One real index, event log and app for the module; the client runs the app's lifespan."""
    root = tmp_path_factory.mktemp("api")
    retriever = build_retriever(root / "lancedb", embedder)
    event_log = EventLog(root / "lancedb", embedder=embedder)
    app = create_app(retriever, event_log, runs_root=root / "recall_runs")
    with TestClient(app) as client:
        yield client, event_log, retriever, root
    assert event_log.failures == 0


def stored_event(event_log: EventLog, event_id: str) -> dict:
    rows = [r for r in event_log.events().to_dicts() if r["event_id"] == event_id]
    assert len(rows) == 1, f"event {event_id} stored {len(rows)} times"
    return rows[0]


def test_search_returns_hits_meta_and_evidence(setup):
    client, event_log, _, root = setup
    response = client.get(SEARCH, params={"q": "rye bread at the bakery", "chat": CHAT, "k": 3, "self_rag": 1,
                                          "user_id": "ana", "session_id": "s1"})
    assert response.status_code == 200
    body = response.json()
    hits, meta = body["hits"], body["meta"]
    assert len(hits) == 3 and meta["count"] == 3
    assert {"kw", "recency", "refs", "tier_weight", "rubric", "new_score"} <= set(hits[0]["reasons"])
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    assert meta["params"]["self_rag"] == 1 and meta["params"]["k"] == 3

    evidence = Path(body["evidence_path"])
    assert evidence.parent.parent == root / "recall_runs"
    record = json.loads(evidence.read_text())
    assert record["query"] == "rye bread at the bakery"
    assert [item["id"] for item in record["post_items"]] == [h["id"] for h in hits]

    event = stored_event(event_log, meta["event_id"])
    assert (event["user_id"], event["session_id"], event["chat_file"]) == ("ana", "s1", CHAT)
    assert event["query"] == "rye bread at the bakery"
    assert event["returned_ids"] == [h["id"] for h in hits]
    assert event["method"] == "hybrid"
    counts = json.loads(event["counts_per_source"])
    assert counts == {s: sum(s in h["sources"] for h in hits) for h in hits for s in h["sources"]}
    assert event["latency_ms"] > 0 and event["tokens_in_context"] > 0
    assert event["cited_ids"] == [] and event["citation_confidence"] is None


def test_each_search_writes_one_run_file_and_one_event(setup):
    client, event_log, _, root = setup
    before_events = event_log.events().height
    before_runs = len(list((root / "recall_runs").rglob("run_*.json")))
    for _ in range(2):
        assert client.get(SEARCH, params={"q": "marathon", "chat": CHAT}).status_code == 200
    assert event_log.events().height == before_events + 2
    assert len(list((root / "recall_runs").rglob("run_*.json"))) == before_runs + 2


@pytest.mark.parametrize(
    ("params", "status", "field"),
    [
        ({"chat": CHAT}, 400, "q"),
        ({"q": "   ", "chat": CHAT}, 400, "q"),
        ({"q": "x" * 1001, "chat": CHAT}, 400, "q"),
        ({"q": "rye"}, 400, "chat"),
        ({"q": "rye", "chat": "no_such_chat"}, 404, "chat"),
        ({"q": "rye", "chat": "bad'chat"}, 400, "chat"),
        ({"q": "rye", "chat": CHAT, "k": "0"}, 400, "k"),
        ({"q": "rye", "chat": CHAT, "k": "51"}, 400, "k"),
        ({"q": "rye", "chat": CHAT, "k": "2.5"}, 400, "k"),
        ({"q": "rye", "chat": CHAT, "k": "-3"}, 400, "k"),
        ({"q": "rye", "chat": CHAT, "need_fresh": "2"}, 400, "need_fresh"),
        ({"q": "rye", "chat": CHAT, "self_rag": "true"}, 400, "self_rag"),
        ({"q": "rye", "chat": CHAT, "halflife_days": "0"}, 400, "halflife_days"),
        ({"q": "rye", "chat": CHAT, "halflife_days": "-7"}, 400, "halflife_days"),
        ({"q": "rye", "chat": CHAT, "halflife_days": "nan"}, 400, "halflife_days"),
        ({"q": "rye", "chat": CHAT, "halflife_days": "inf"}, 400, "halflife_days"),
        ({"q": "rye", "chat": CHAT, "fresh_weight": "heavy"}, 400, "fresh_weight"),
        ({"q": "rye", "chat": CHAT, "fresh_weight": "1000"}, 400, "fresh_weight"),
        ({"q": "rye", "chat": CHAT, "user_id": "x" * 201}, 400, "user_id"),
        ({"q": "rye", "chat": CHAT, "user_id": "a\nb"}, 400, "user_id"),
        ({"q": "rye", "chat": CHAT, "limit": "3"}, 400, "limit"),
    ],
)
def test_search_validation(setup, params, status, field):
    client, event_log, _, _ = setup
    before = event_log.events().height
    response = client.get(SEARCH, params=params)
    assert response.status_code == status
    error = response.json()["error"]
    assert error["field"] == field and error["message"]
    assert event_log.events().height == before  # rejected requests log nothing


def test_repeated_parameters_are_rejected(setup):
    client = setup[0]
    response = client.get(f"{SEARCH}?q=rye&chat={CHAT}&k=2&k=3")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "k"


def test_limits_are_inclusive(setup):
    client = setup[0]
    response = client.get(SEARCH, params={"q": "x" * 1000, "chat": CHAT, "k": 50, "need_fresh": 1,
                                          "halflife_days": "0.5", "fresh_weight": "0.9"})
    assert response.status_code == 200
    body = response.json()
    assert body["meta"]["count"] == 8  # the whole tiny chat
    assert body["meta"]["params"]["half_life_days"] == 0.5 and body["meta"]["params"]["need_fresh"] == 1


def test_wrong_method_and_path_are_json_errors(setup):
    client = setup[0]
    assert client.post(SEARCH).status_code == 405
    response = client.get("/api/nothing")
    assert response.status_code == 404
    assert response.json()["error"]["message"]


def test_ask_returns_the_contract_and_logs_citations(setup):
    client, event_log, retriever, _ = setup
    response = client.post("/api/ask", json={"chat": CHAT, "question": "How many loaves of rye did Ana bake?",
                                             "profile": "fast", "user_id": "ben"})
    assert response.status_code == 200
    answer = response.json()
    assert {"Answer", "Evidence", "Unknowns", "trace", "profile"} <= set(answer)
    assert answer["profile"] == "fast"
    evidence_ids = [item["id"] for item in answer["Evidence"]]
    assert "D11:1" in evidence_ids

    event = stored_event(event_log, response.headers["X-Retrieval-Event-Id"])
    assert (event["user_id"], event["query"], event["chat_file"]) == ("ben", "How many loaves of rye did Ana bake?", CHAT)
    assert event["returned_ids"] == [r["id"] for r in answer["trace"]["reranked"]]
    assert (event["cited_ids"], event["citation_confidence"]) == (evidence_ids, 1.0)
    assert event["threshold"] == 0.60  # the fast profile's top-5 relevance threshold
    assert event["method"] == "hybrid"  # retrieval.toml's default variant is a hybrid one
    assert retriever.default_variant.startswith("hybrid")


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        (b"{not json", 400, None),
        (b"[1, 2]", 400, None),
        (json.dumps({"chat": CHAT}).encode(), 400, "question"),
        (json.dumps({"question": "Where?"}).encode(), 400, "chat"),
        (json.dumps({"chat": CHAT, "question": "Where?", "profile": "turbo"}).encode(), 400, "profile"),
        (json.dumps({"chat": CHAT, "question": "Where?", "mode": "magic"}).encode(), 400, "mode"),
        (json.dumps({"chat": CHAT, "question": "Where?", "verbose": True}).encode(), 400, "verbose"),
        (json.dumps({"chat": CHAT, "question": 42}).encode(), 400, "question"),
        (json.dumps({"chat": CHAT, "question": "x" * 1001}).encode(), 400, "question"),
        (json.dumps({"chat": "no_such_chat", "question": "Where?"}).encode(), 404, "chat"),
        (json.dumps({"chat": CHAT, "question": "x" * 20_000}).encode(), 413, None),
    ],
)
def test_ask_validation(setup, body, status, field):
    client = setup[0]
    response = client.post("/api/ask", content=body, headers={"content-type": "application/json"})
    assert response.status_code == status
    assert response.json()["error"]["field"] == field


def test_fifty_concurrent_searches_give_fifty_events(setup):
    client, event_log, _, _ = setup
    queries = ["rye bread", "marathon training", "bakery job", "long run", "sourdough"]

    def one(i: int) -> str:
        response = client.get(SEARCH, params={"q": queries[i % 5], "chat": CHAT, "k": 2, "user_id": f"load{i}"})
        assert response.status_code == 200
        return response.json()["meta"]["event_id"]

    with ThreadPoolExecutor(max_workers=10) as pool:
        event_ids = list(pool.map(one, range(50)))
    stored = event_log.events().filter(event_log.events()["user_id"].str.starts_with("load"))
    assert stored.height == 50
    assert sorted(stored["event_id"].to_list()) == sorted(event_ids)
    by_user = {r["user_id"]: r for r in stored.to_dicts()}
    assert all(by_user[f"load{i}"]["query"] == queries[i % 5] for i in range(50))
    assert all(len(r["returned_ids"]) == 2 for r in by_user.values())


def test_a_broken_event_store_still_answers_and_counts_the_failures(embedder, tmp_path, setup):
    retriever = setup[2]
    not_a_folder = tmp_path / "events_file"
    not_a_folder.write_text("not a database")
    broken_log = EventLog(not_a_folder, embedder=embedder)
    app = create_app(retriever, broken_log, runs_root=tmp_path / "runs")
    with TestClient(app) as client:
        search = client.get(SEARCH, params={"q": "rye bread", "chat": CHAT, "k": 2})
        assert search.status_code == 200 and len(search.json()["hits"]) == 2
        ask = client.post("/api/ask", json={"chat": CHAT, "question": "Where does Ana work?", "profile": "fast"})
        assert ask.status_code == 200 and ask.json()["Answer"]
        assert broken_log.flush()
        assert broken_log.failures == 2


def test_serve_rejects_a_bad_port(setup):
    with pytest.raises(ValueError, match="port"):
        serve(setup[0].app, port=70000)
