"""Reciprocal rank fusion (Cormack et al. 2009): score(d) = sum_i w_i / (k + rank_i(d))."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

RRF_K = 60


def rrf(
    ranked_lists: Sequence[Sequence[Hashable]],
    weights: Sequence[float] | None = None,
    k: int = RRF_K,
) -> list[tuple[Hashable, float]]:
    """Fuse ranked id lists (best first, ranks from 1) into one list of (id, score), best first.

    Ties keep the order in which the ids were first met (list by list, rank by rank), so the
    result is deterministic. A duplicate id inside one list counts at its best rank only.
    """
    weights = _weights(weights, len(ranked_lists), k)
    scores: dict[Hashable, float] = {}
    for ranked, weight in zip(ranked_lists, weights):
        seen = set()
        for rank, item in enumerate(ranked, start=1):
            if item in seen:
                continue
            seen.add(item)
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    first_seen = {item: i for i, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], first_seen[kv[0]]))


def _weights(weights: Sequence[float] | None, n_lists: int, k: int) -> Sequence[float]:
    """The weights of ``n_lists`` lists (default 1.0 each), after checking them and ``k``."""
    if k < 0:
        raise ValueError(f"rrf: k must be >= 0, got {k}")
    if weights is None:
        return [1.0] * n_lists
    if len(weights) != n_lists:
        raise ValueError(f"rrf: {len(weights)} weights for {n_lists} lists")
    return weights


def rrf_rows(
    ranked_rows: Sequence[Sequence[int]],
    size: int,
    weights: Sequence[float] | None = None,
    k: int = RRF_K,
) -> list[tuple[int, float]]:
    """``rrf`` for lists of row numbers in ``range(size)``, vectorized (numpy).

    Same scores and order as ``rrf`` when no list repeats a row; a chat's ~1,600 messages in
    six lists fuse in well under a millisecond instead of ~10 ms in pure Python.
    """
    weights = _weights(weights, len(ranked_rows), k)
    scores = np.zeros(size, dtype=np.float64)
    first_seen = np.full(size, np.iinfo(np.int64).max, dtype=np.int64)
    for i, (rows, weight) in enumerate(zip(ranked_rows, weights)):
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size == 0:
            continue
        scores[rows] += weight / (k + np.arange(1, rows.size + 1, dtype=np.float64))
        first_seen[rows] = np.minimum(first_seen[rows], i * size + np.arange(rows.size))
    present = np.flatnonzero(first_seen != np.iinfo(np.int64).max)
    order = present[np.lexsort((first_seen[present], -scores[present]))]
    return [(int(r), float(scores[r])) for r in order]
