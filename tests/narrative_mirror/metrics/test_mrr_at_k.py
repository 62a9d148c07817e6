import pytest

from narrative_mirror.metrics import mrr_at_k


def test_reciprocal_rank_of_first_gold_within_k():
    ranked = ["x", "y", "a", "b"]
    assert mrr_at_k(ranked, ["a", "b"], 10) == pytest.approx(1 / 3)
    assert mrr_at_k(ranked, ["a", "b"], 2) == 0.0
    assert mrr_at_k(ranked, ["x"], 1) == 1.0


def test_repeat_takes_no_rank():
    assert mrr_at_k(["x", "x", "a"], ["a"], 2) == 0.5


def test_empty_gold_is_not_scored():
    assert mrr_at_k(["a"], [], 10) is None
