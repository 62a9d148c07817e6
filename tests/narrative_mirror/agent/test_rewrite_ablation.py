"""benchmarks/rewrite_ablation.py (seed 003's rewrite-context x dual-path ablation) on the tiny
hand-made chat of conftest.py: the contexts hold exactly the expected messages."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from rewrite_ablation import CONTEXTS, ablation, rewrite_context, rewritten  # noqa: E402

from narrative_mirror.retrieval.iterative import branch_context  # noqa: E402

QUESTION = "Where does Ben run?"


def test_leaf_context_is_the_first_search_and_branch_context_its_blocks(retriever, chat_file):
    leaf = rewrite_context(retriever, chat_file, QUESTION, "leaf")
    first = retriever.search(chat_file, QUESTION, k=5).hits
    assert [lid for lid, _ in leaf] == [h.local_id for h in first] and leaf[0][0] == "D1:4"
    # Branch context: the stored summaries of the first two blocks the leaf hits sit in (and of their threads;
    # this chat has none stored: tests/narrative_mirror/retrieval/test_iterative.py covers them).
    blocks = list(dict.fromkeys(h.block_id for h in first if h.block_id))[:2]
    branch = rewrite_context(retriever, chat_file, QUESTION, "branch")
    assert [text for _, text in branch] == branch_context(retriever, chat_file, blocks)
    both = rewrite_context(retriever, chat_file, QUESTION, "all")
    assert both == leaf + branch
    assert rewrite_context(retriever, chat_file, QUESTION, "none") == []


def test_rewrite_adds_the_terms_the_context_repeats():
    context = [("a", "My knee hurts after the long run"), ("b", "Ice your knee"), ("c", "The knee is fine again")]
    assert rewritten("How is Ben's recovery?", context).split()[:4] == ["How", "is", "Ben's", "recovery?"]
    assert rewritten("How is Ben's recovery?", context).split()[4] == "knee"
    assert rewritten("How is Ben's recovery?", []) == "How is Ben's recovery?"


@pytest.mark.parametrize("variant", ["hybrid_learned", "dual_path"])
def test_ablation_ranks_every_question_under_every_context(retriever, chat_file, variant):
    questions = [(chat_file, QUESTION), (chat_file, "Did Ana harvest the tomatoes?")]
    result = ablation(retriever, questions, [variant], depth=5)
    assert set(result) == {(c, variant) for c in CONTEXTS}
    assert all(len(rankings) == 2 and all(len(r) == 5 for r in rankings) for rankings in result.values())
    # Without context the query is the question itself: the same ranking as a plain search.
    assert result[("none", variant)][1] == [
        h.local_id for h in retriever.search(chat_file, "Did Ana harvest the tomatoes?", k=5, variant=variant).hits
    ]
