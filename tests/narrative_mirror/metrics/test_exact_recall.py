import pytest

from narrative_mirror.metrics import exact_recall


def test_exact_recall_over_the_returned_set():
    assert exact_recall(["a", "x", "a"], ["a", "b"]) == 0.5
    assert exact_recall(["b", "a"], ["a", "b", "b"]) == 1.0
    assert exact_recall([], ["a"]) == 0.0


def test_empty_gold_is_not_scored():
    assert exact_recall(["a"], []) is None


def test_a_bare_string_is_refused():
    with pytest.raises(TypeError, match="returned must be a collection of ids"):
        exact_recall("D1:1", ["D1:1"])
