"""Seed 004's need_fresh changes the ranking under the default variant (not only the reported
scores): of two messages saying the same thing, the recent one comes first (real LanceDB, real
embedder, the default ``hybrid_learned`` variant)."""

import memory_api_chat
import pytest
from memory_api_chat import CHAT, build_retriever

from narrative_mirror.recall_runs import recorded_search

SAME = "The plumber is coming on Friday at noon to fix the kitchen sink."
MESSAGES = [
    (0, "Ana", SAME, 0, 0.0),
    (0, "Ben", "Great, I will stay home and let him in.", 0, 0.0),
    (0, "Ana", "Rye and sourdough at the bakery every morning.", 0, 0.0),
    (0, "Ben", "My marathon training starts next week.", 0, 0.0),
    (20, "Ana", SAME, 0, 0.0),
    (20, "Ben", "Great, I will stay home and let him in.", 0, 0.0),
    (20, "Ben", "I ran thirty kilometres on Sunday.", 0, 0.0),
    (20, "Ana", "Rest your legs after that long run.", 0, 0.0),
]
OLD, NEW = "D1:1", "D21:1"


@pytest.fixture(scope="module")
def retriever(embedder, tmp_path_factory):
    patch = pytest.MonkeyPatch()
    patch.setattr(memory_api_chat, "MESSAGES", MESSAGES)
    try:
        yield build_retriever(tmp_path_factory.mktemp("fresh") / "lancedb", embedder)
    finally:
        patch.undo()


def _order(hits) -> list[str]:
    return [h.local_id for h in hits if h.local_id in (OLD, NEW)]


def test_need_fresh_puts_the_recent_of_two_equal_messages_first(retriever):
    question = "When is the plumber coming to fix the sink?"
    assert retriever.default_variant == "hybrid_learned"
    plain = retriever.search(CHAT, question, k=5)
    fresh = retriever.search(CHAT, question, k=5, need_fresh=True)
    assert _order(fresh.hits) == [NEW, OLD]
    assert _order(plain.hits) == [OLD, NEW]  # equal text: without need_fresh the earlier one leads
    assert fresh.hits[0].reasons["recency"] > fresh.hits[1].reasons["recency"]


def test_recorded_searches_rank_by_freshness_too(retriever, tmp_path):
    question = "When is the plumber coming to fix the sink?"
    fresh = recorded_search(retriever, CHAT, question, 5, need_fresh=True, root=tmp_path)
    assert _order(fresh.result.hits) == [NEW, OLD] and fresh.params["need_fresh"] == 1
    plain = recorded_search(retriever, CHAT, question, 5, root=tmp_path)
    assert _order(plain.result.hits) == [OLD, NEW]
