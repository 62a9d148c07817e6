"""``ask_logged``: the event holds graded citations, the query's vector and the settings the ask used."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from memory_api_chat import CHAT, build_retriever

from narrative_mirror.agent.profiles import profiles
from narrative_mirror.events.writer import EventLog
from narrative_mirror.logged_query import ask_logged


@pytest.fixture(scope="module")
def logged(embedder, tmp_path_factory):
    root = tmp_path_factory.mktemp("logged")
    retriever = build_retriever(root / "lancedb", embedder)
    event_log = EventLog(root / "lancedb")
    yield retriever, event_log
    event_log.close()


def stored(event_log: EventLog, event_id: str) -> dict:
    return next(r for r in event_log.events().to_dicts() if r["event_id"] == event_id)


def test_an_answer_s_citations_are_graded_and_its_query_vector_kept(logged, embedder):
    retriever, event_log = logged
    question = "How many loaves of rye did Ana bake?"
    answer, event_id = ask_logged(retriever, CHAT, question, "fast", None, "agent", event_log)
    event = stored(event_log, event_id)
    assert not answer.abstained and event["cited_ids"]
    assert len(event["cited_confidences"]) == len(event["cited_ids"])
    assert all(0.0 < c <= 1.0 for c in event["cited_confidences"])
    assert event["citation_confidence"] == pytest.approx(np.mean(event["cited_confidences"]))
    assert np.allclose(event["query_vector"], embedder.encode([question])[0], atol=1e-5)


def test_an_abstention_cites_nothing_and_has_no_confidence(logged):
    retriever, event_log = logged
    answer, event_id = ask_logged(
        retriever, CHAT, "What is the name of Ben's grandmother's cat?", "fast", None, "agent", event_log
    )
    assert answer.abstained
    event = stored(event_log, event_id)
    assert (event["cited_ids"], event["citation_confidence"]) == ([], None)


def test_the_threshold_is_the_profile_s_the_ask_used(logged):
    retriever, event_log = logged
    custom = dataclasses.replace(profiles()["fast"], name="custom", min_top5_relevance=0.42)
    _, event_id = ask_logged(retriever, CHAT, "Where does Ana work?", custom, None, "agent", event_log)
    event = stored(event_log, event_id)
    assert (event["threshold"], event["method"]) == (0.42, "hybrid")
