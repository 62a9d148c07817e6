import math

import pytest

from narrative_mirror.metrics import ndcg_at_k


def test_binary_ndcg_with_a_repeat_in_the_ranking():
    # Distinct top 3 of [x, a, a, b] is [x, a, b]: gains at ranks 2 and 3; ideal has 3 hits.
    expected = (1 / math.log2(3) + 1 / math.log2(4)) / (1 + 1 / math.log2(3) + 1 / math.log2(4))
    assert ndcg_at_k(["x", "a", "a", "b"], ["a", "b", "c"], 3) == pytest.approx(expected, abs=1e-12)


def test_ideal_dcg_uses_min_of_gold_size_and_k():
    assert ndcg_at_k(["b", "a", "x"], ["a", "b"], 10) == 1.0
    assert ndcg_at_k(["a", "x"], ["a", "b", "c"], 1) == 1.0
    assert ndcg_at_k(["x", "a"], ["a"], 10) == pytest.approx(1 / math.log2(3), abs=1e-12)


def test_no_hit_and_empty_gold():
    assert ndcg_at_k(["x", "y"], ["a"], 10) == 0.0
    assert ndcg_at_k(["a"], [], 10) is None
