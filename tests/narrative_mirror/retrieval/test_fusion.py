import pytest

from narrative_mirror.retrieval.fusion import rrf, rrf_rows


def test_rrf_sums_reciprocal_ranks():
    fused = rrf([["a", "b", "c"], ["b", "c", "d"]], k=60)
    assert [item for item, _ in fused] == ["b", "c", "a", "d"]
    scores = dict(fused)
    assert scores["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 62)
    assert scores["a"] == pytest.approx(1 / 61)
    assert scores["d"] == pytest.approx(1 / 63)


def test_rrf_weights_and_small_k():
    fused = rrf([["a", "b"], ["b", "a"]], weights=[1.0, 3.0], k=0)
    # a: 1/1 + 3/2 = 2.5 ; b: 1/2 + 3/1 = 3.5
    assert fused == [("b", pytest.approx(3.5)), ("a", pytest.approx(2.5))]


def test_rrf_ties_keep_first_seen_order_and_duplicates_count_once():
    fused = rrf([["x", "y", "x"], ["y", "x"]], k=1)
    # x: 1/2 + 1/3 ; y: 1/3 + 1/2 -> tie, x met first
    assert [item for item, _ in fused] == ["x", "y"]
    assert dict(fused)["x"] == pytest.approx(1 / 2 + 1 / 3)


def test_rrf_empty_and_bad_arguments():
    assert rrf([]) == []
    assert rrf([[], []]) == []
    with pytest.raises(ValueError, match="2 weights for 1 lists"):
        rrf([["a"]], weights=[1.0, 2.0])
    with pytest.raises(ValueError, match="k must be >= 0"):
        rrf([["a"]], k=-1)


def test_rrf_rows_matches_rrf():
    lists = [[3, 0, 7, 2], [7, 3], [], [5, 2, 0]]
    weights = [1.0, 0.5, 2.0, 0.7]
    expected = rrf(lists, weights=weights, k=60)
    got = rrf_rows(lists, 8, weights=weights, k=60)
    assert [r for r, _ in got] == [r for r, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected])
    # ties keep first-seen order as in rrf
    assert rrf_rows([[4, 1], [1, 4]], 5, k=1) == rrf([[4, 1], [1, 4]], k=1)
    assert rrf_rows([], 3) == []
    with pytest.raises(ValueError, match="1 weights for 2 lists"):
        rrf_rows([[0], [1]], 2, weights=[1.0])
