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


def test_order_desc_is_the_two_key_sort_for_ties_signed_zeros_and_infinities():
    import numpy as np

    from narrative_mirror.retrieval.fusion import order_desc

    rng = np.random.default_rng(11)
    odd = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, 0.25])
    for trial in range(200):
        n = int(rng.integers(1, 2000))
        base = (
            rng.choice(odd, size=n)
            if trial % 3 == 0
            else np.round(rng.standard_normal(n), 1)
            if trial % 3 == 1
            else rng.standard_normal(n)
        )
        for dtype in (np.float32, np.float64):
            values = base.astype(dtype)
            assert order_desc(values).tolist() == np.lexsort((np.arange(n), -values)).tolist()
            tie = rng.permutation(3 * n)[:n]
            assert order_desc(values, tie).tolist() == np.lexsort((tie, -values)).tolist()
    with_nan = np.array([1.0, np.nan, 2.0, 1.0], dtype=np.float32)
    assert order_desc(with_nan).tolist() == np.lexsort((np.arange(4), -with_nan)).tolist()
    assert order_desc(np.zeros(0)).tolist() == []


def test_fused_heads_are_the_full_order_cut_short():
    import numpy as np

    from narrative_mirror.retrieval.fusion import rrf_fuse

    rng = np.random.default_rng(5)
    size = 3000
    lists = [
        rng.permutation(size),
        rng.permutation(size)[:40],
        rng.permutation(size),
        np.repeat(rng.permutation(size // 5), 1)[:300],
    ]
    weights = [1.0, 0.5, 2.0, 1.0]
    fused = rrf_fuse(lists, size, weights, k=60)
    full = rrf([list(map(int, ranked)) for ranked in lists], weights=weights, k=60)
    assert [r for r, _ in fused] == [r for r, _ in full]
    for n in (0, 1, 16, 100, 2999, 5000):
        assert fused[:n] == list(fused)[:n] == fused.head(n)
    assert len(fused) == size and fused[3] == list(fused)[3]
    # ties everywhere (equal lists twice): first-seen order decides, as in rrf
    tied = rrf_fuse([[4, 1, 3], [3, 1, 4]], 5, k=1)
    assert tied.head(2) == rrf([[4, 1, 3], [3, 1, 4]], k=1)[:2]


def test_extending_a_fusion_equals_fusing_all_lists_afresh():
    import numpy as np

    from narrative_mirror.retrieval.fusion import rrf_fuse

    rng = np.random.default_rng(9)
    size = 2000
    lists = [rng.permutation(size)[:50], rng.permutation(size), rng.permutation(size)[:700], rng.permutation(size)[:30]]
    weights = [1.0, 0.7, 0.5, 2.0]
    for first in (1, 2, 3):
        start = rrf_fuse(lists[:first], size, weights[:first])
        extended = rrf_fuse(lists, size, weights, start=start)
        fresh = rrf_fuse(lists, size, weights)
        assert extended.scores.tobytes() == fresh.scores.tobytes() and list(extended) == list(fresh)
        assert extended.head(20) == fresh.head(20)
    with pytest.raises(ValueError, match="does not fit"):
        rrf_fuse(lists[:1], size, weights[:1], start=rrf_fuse(lists[:2], size, weights[:2]))
