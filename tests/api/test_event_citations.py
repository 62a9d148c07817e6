"""``POST /api/events/{id}/citations``: a client that answers itself reports what it cited (seed
001's second phase); a token reaches only its own namespace's events."""

from __future__ import annotations

import pytest
from memory_api_chat import CHAT, build_retriever
from starlette.testclient import TestClient

from api.access import add_token, load_tokens
from api.app import create_app
from narrative_mirror.events.writer import EventLog

SEARCH = "/api/memory/search"


@pytest.fixture(scope="module")
def served(embedder, tmp_path_factory):
    root = tmp_path_factory.mktemp("cites")
    retriever = build_retriever(root / "lancedb", embedder)
    tokens = root / "tokens.json"
    secrets = {name: add_token(tokens, name, [CHAT]) for name in ("ana", "cy")}
    event_log = EventLog(root / "lancedb")
    app = create_app(retriever, event_log, runs_root=root / "runs", tokens=load_tokens(tokens))
    with TestClient(app) as client:
        yield client, event_log, {n: {"Authorization": f"Bearer {s}"} for n, s in secrets.items()}
    assert event_log.failures == 0


def searched(client, headers) -> str:
    response = client.get(SEARCH, params={"q": "rye bread", "chat": CHAT, "user_id": "me"}, headers=headers)
    assert response.status_code == 200
    return response.json()["meta"]["event_id"]


def test_a_client_reports_its_citations_and_they_are_stored(served):
    client, event_log, auth = served
    event_id = searched(client, auth["ana"])
    response = client.post(
        f"/api/events/{event_id}/citations",
        json={"cited_ids": ["D1:2", "D11:1"], "confidence": [0.9, 0.5]},
        headers=auth["ana"],
    )
    assert response.status_code == 200
    assert response.json()["citation_confidence"] == pytest.approx(0.7)
    row = next(r for r in event_log.events().to_dicts() if r["event_id"] == event_id)
    assert (row["cited_ids"], row["cited_confidences"]) == (["D1:2", "D11:1"], [0.9, 0.5])
    assert row["citation_confidence"] == pytest.approx(0.7)
    # One confidence for all, or none (an explicit report counts as certain).
    assert client.post(f"/api/events/{event_id}/citations", json={"cited_ids": ["D1:2"]}, headers=auth["ana"]).json()[
        "cited_confidences"
    ] == [1.0]


def test_another_namespace_gets_the_same_404_as_a_missing_event(served):
    client, event_log, auth = served
    event_id = searched(client, auth["ana"])
    body = {"cited_ids": ["D1:2"], "confidence": 0.4}
    foreign = client.post(f"/api/events/{event_id}/citations", json=body, headers=auth["cy"])
    missing = client.post("/api/events/no-such-event/citations", json=body, headers=auth["cy"])
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json() == missing.json()
    assert client.post(f"/api/events/{event_id}/citations", json=body).status_code == 401
    row = next(r for r in event_log.events().to_dicts() if r["event_id"] == event_id)
    assert (row["cited_ids"], row["citation_confidence"]) == ([], None)  # untouched


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "cited_ids"),
        ({"cited_ids": "D1:2"}, "cited_ids"),
        ({"cited_ids": ["D1:2"], "confidence": 1.5}, "confidence"),
        ({"cited_ids": ["D1:2"], "confidence": [0.5, 0.5]}, "confidence"),
        ({"cited_ids": ["D1:2"], "extra": 1}, "extra"),
    ],
)
def test_a_bad_report_is_a_400_naming_the_field(served, body, field):
    client, _, auth = served
    event_id = searched(client, auth["ana"])
    response = client.post(f"/api/events/{event_id}/citations", json=body, headers=auth["ana"])
    assert response.status_code == 400
    assert response.json()["error"]["field"] == field
