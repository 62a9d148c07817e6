from narrative_mirror.metrics import precision


def test_precision_over_the_distinct_returned_set():
    assert precision(["a", "x", "a"], ["a", "b"]) == 0.5
    assert precision(["a"], ["a", "b"]) == 1.0
    assert precision(["x", "y", "z", "a"], ["a"]) == 0.25


def test_nothing_returned_scores_zero_and_empty_gold_is_not_scored():
    assert precision([], ["a"]) == 0.0
    assert precision(["a"], []) is None
