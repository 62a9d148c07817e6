"""Seed 004: the tier filter, PII_STRICT quarantine, search runs and recall cards."""

from __future__ import annotations

import json

import memory_api_chat
import pytest
from memory_api_chat import CHAT, build_retriever

from narrative_mirror.recall_runs import recorded_search
from narrative_mirror.search_evidence import record_search

EMAIL = "ben.baker@example.com"
PHONE = "+44 20 7946 0958"


@pytest.fixture
def pii_retriever(embedder, tmp_path, monkeypatch):
    """The tiny chat with an e-mail address and a phone number in two rye messages."""
    messages = list(memory_api_chat.MESSAGES)
    messages[5] = (10, "Ben", f"Save me a loaf of that rye bread! Mail me at {EMAIL}", 0, 0.2)
    messages[2] = (0, "Ana", f"Yes, rye and sourdough, every morning at five. Call {PHONE}", 1, 0.0)
    monkeypatch.setattr(memory_api_chat, "MESSAGES", messages)
    return build_retriever(tmp_path / "lancedb", embedder)


def test_pii_strict_quarantines_personal_data_out_of_results_and_records(pii_retriever, tmp_path, monkeypatch):
    runs = tmp_path / "state" / "recall_runs"
    plain = recorded_search(pii_retriever, CHAT, "rye bread", 8, root=runs)
    assert any(EMAIL in h.text for h in plain.result.hits)  # off by default: returned as written

    monkeypatch.setenv("NM_PII_STRICT", "1")
    strict = recorded_search(pii_retriever, CHAT, "rye bread", 8, root=runs)
    texts = {h.local_id: h.text for h in strict.result.hits}
    assert texts["D11:2"] == "[quarantined: email]" and texts["D1:3"] == "[quarantined: phone]"
    assert texts["D11:1"].startswith("First week at the bakery")  # the rest is untouched
    record = strict.run_path.read_text()
    assert EMAIL not in record and PHONE not in record and "[quarantined: email]" in record
    quarantined = [json.loads(p.read_text()) for p in (tmp_path / "state" / "quarantine").rglob("run_*.json")]
    assert len(quarantined) == 1
    items = {i["id"]: i for i in quarantined[0]["items"]}
    assert items["D11:2"]["kinds"] == ["email"] and EMAIL in items["D11:2"]["text"]
    assert items["D1:3"]["kinds"] == ["phone"] and PHONE in items["D1:3"]["text"]


def test_tiers_filter_the_search(retriever, tmp_path):
    tiers = retriever.chat(CHAT).tiers
    top = recorded_search(retriever, CHAT, "rye bread at the bakery", 3, root=tmp_path, tiers=[3])
    assert [h.local_id for h in top.result.hits] == ["D11:1"]  # the one tier-3 message
    assert top.params["tiers"] == [3]
    low = recorded_search(retriever, CHAT, "rye bread at the bakery", 3, root=tmp_path, tiers=[0, 1])
    assert low.result.hits and {tiers[h.local_id] for h in low.result.hits} <= {0, 1}
    assert {tiers[h.local_id] for h in recorded_search(retriever, CHAT, "rye", 8, root=tmp_path).result.hits} == {
        0,
        1,
        2,
        3,
    }  # no filter: every tier


def test_a_search_run_and_the_day_s_recall_cards(retriever, tmp_path):
    runs = tmp_path / "recall_runs"
    recorded = recorded_search(retriever, CHAT, "rye bread", 3, root=runs)
    hits = [{"id": h.local_id, "text": h.text, "score": h.score} for h in recorded.result.hits]
    paths = [
        record_search(
            q, CHAT, recorded.params, f"ev{n}", hits, retriever.chat(CHAT).tiers, recorded.run_path, root=runs
        )
        for n, q in enumerate(["rye bread", "marathon"])
    ]
    run = json.loads(paths[0].read_text())
    assert paths[0].parent.parent == tmp_path / "search_runs" and paths[0].parent.name.isdigit()
    assert (run["query"], run["event_id"], run["hits"]) == ("rye bread", "ev0", hits)
    assert run["recall_run"] == str(recorded.run_path.relative_to(tmp_path))
    [cards_file] = (tmp_path / "recall").glob("cards_*.json")
    cards = json.loads(cards_file.read_text())
    assert cards["date"] == paths[0].parent.name and cards_file.name == f"cards_{cards['date']}.json"
    assert [c["query"] for c in cards["cards"]] == ["rye bread", "marathon"]
    first = cards["cards"][0]
    assert [t["id"] for t in first["top"]] == [h["id"] for h in hits][:3]
    assert all(t["tier"] == retriever.chat(CHAT).tiers[t["id"]] for t in first["top"])
    assert first["search_run"] == str(paths[0].relative_to(tmp_path))


def test_the_cards_keep_the_day_s_last_searches(tmp_path, monkeypatch):
    from narrative_mirror import search_evidence

    monkeypatch.setattr(search_evidence, "MAX_CARDS", 3)
    for n in range(5):
        record_search(f"q{n}", CHAT, {}, f"ev{n}", [], {}, None, root=tmp_path / "recall_runs")
    [cards] = (tmp_path / "recall").glob("cards_*.json")
    assert [c["query"] for c in json.loads(cards.read_text())["cards"]] == ["q2", "q3", "q4"]
    assert len(list((tmp_path / "search_runs").rglob("run_*.json"))) == 5  # every search keeps its run
