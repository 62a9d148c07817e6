"""Reciprocal rank fusion (Cormack et al. 2009): score(d) = sum_i w_i / (k + rank_i(d))."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

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
    if weights is None:
        weights = [1.0] * len(ranked_lists)
    if len(weights) != len(ranked_lists):
        raise ValueError(f"rrf: {len(weights)} weights for {len(ranked_lists)} lists")
    if k < 0:
        raise ValueError(f"rrf: k must be >= 0, got {k}")
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
