import pytest

from narrative_mirror.metrics import recall_at_k


def test_recall_counts_gold_in_the_first_k():
    ranked = ["x", "a", "y", "b", "z"]
    gold = ["a", "b", "c"]
    assert recall_at_k(ranked, gold, 1) == 0.0
    assert recall_at_k(ranked, gold, 2) == pytest.approx(1 / 3)
    assert recall_at_k(ranked, gold, 4) == pytest.approx(2 / 3)
    assert recall_at_k(ranked, gold, 100) == pytest.approx(2 / 3)


def test_repeated_id_counts_once_and_takes_no_extra_slot():
    assert recall_at_k(["a", "a", "a"], ["a", "b"], 3) == 0.5
    # Distinct top 2 is [a, b]: the repeat of a does not push b out.
    assert recall_at_k(["a", "a", "b"], ["b"], 2) == 1.0


def test_empty_gold_is_not_scored_and_empty_ranking_scores_zero():
    assert recall_at_k(["a"], [], 5) is None
    assert recall_at_k([], ["a"], 5) == 0.0


@pytest.mark.parametrize("k", [0, -1, 2.0, True])
def test_k_must_be_a_positive_integer(k):
    with pytest.raises(ValueError, match="k must be a positive integer"):
        recall_at_k(["a"], ["a"], k)


def test_a_bare_string_is_refused():
    with pytest.raises(TypeError, match="ranked must be a collection of ids"):
        recall_at_k("D1:1", ["D1:1"], 5)
    with pytest.raises(TypeError, match="gold must be a collection of ids"):
        recall_at_k(["D1:1"], "D1:1", 5)
