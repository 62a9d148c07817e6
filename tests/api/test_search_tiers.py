"""The search endpoint's ``tiers`` filter and its search-run / recall-card evidence (seed 004)."""

from __future__ import annotations

import json

from memory_api_chat import CHAT, build_retriever
from starlette.testclient import TestClient

from api.app import create_app
from narrative_mirror.events.writer import EventLog

SEARCH = "/api/memory/search"


def test_tiers_filter_and_the_evidence_files(embedder, tmp_path):
    retriever = build_retriever(tmp_path / "lancedb", embedder)
    app = create_app(retriever, EventLog(tmp_path / "lancedb"), runs_root=tmp_path / "recall_runs")
    with TestClient(app, base_url="http://localhost") as client:
        top = client.get(SEARCH, params={"q": "rye bread at the bakery", "chat": CHAT, "k": 3, "tiers": "3"})
        assert top.status_code == 200
        assert [h["id"] for h in top.json()["hits"]] == ["D11:1"]
        assert top.json()["meta"]["params"]["tiers"] == [3]
        both = client.get(SEARCH, params={"q": "rye bread", "chat": CHAT, "k": 8, "tiers": "0,1"}).json()
        assert {retriever.chat(CHAT).tiers[h["id"]] for h in both["hits"]} <= {0, 1}
        bad = client.get(SEARCH, params={"q": "rye", "chat": CHAT, "tiers": "7"})
        assert bad.status_code == 400 and bad.json()["error"]["field"] == "tiers"
    run = json.loads((tmp_path / top.json()["evidence_path"]).read_text())
    assert run["hits"] == top.json()["hits"] and run["params"]["tiers"] == [3]
    [cards] = (tmp_path / "recall").glob("cards_*.json")
    assert [c["query"] for c in json.loads(cards.read_text())["cards"]] == ["rye bread at the bakery", "rye bread"]
