"""Reciprocal rank fusion (Cormack et al. 2009): score(d) = sum_i w_i / (k + rank_i(d))."""

from __future__ import annotations

import functools
from collections.abc import Hashable, Sequence

import numpy as np

RRF_K = 60


def rrf(
    ranked_lists: Sequence[Sequence[Hashable]], weights: Sequence[float] | None = None, k: int = RRF_K
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


def order_desc(values: np.ndarray, tie_key: np.ndarray | None = None) -> np.ndarray:
    """Indices of ``values`` from the largest value down; equal values by ascending ``tie_key``
    (non-negative integers; default: the index). The order of ``np.lexsort((tie_key, -values))``
    (3 ms for 45,000 values), computed in ~0.3-1 ms: float32 values with index ties as ONE sort
    of 64-bit keys (value bits, index); otherwise an unstable sort whose (few) runs of equal
    values are ordered afterwards, or, when ties are many, one sort of (value rank, tie key)."""
    values = np.asarray(values)
    size = values.size
    if size < 2 or np.isnan(values).any():
        keys = np.arange(size) if tie_key is None else np.asarray(tie_key)
        return np.lexsort((keys, -values)) if size else np.zeros(0, dtype=np.int64)
    if tie_key is None and values.dtype == np.float32 and size < 2**32:
        flipped = (-values) + np.float32(0.0)  # -0.0 -> +0.0: lexsort ranks them equal
        bits = flipped.view(np.uint32)
        ascending = np.where(bits >> 31, ~bits, bits | np.uint32(0x80000000)).astype(np.uint64)
        packed = np.sort((ascending << np.uint64(32)) | np.arange(size, dtype=np.uint64))
        return (packed & np.uint64(0xFFFFFFFF)).astype(np.int64)
    keys = np.arange(size) if tie_key is None else np.asarray(tie_key, dtype=np.int64)
    order = np.argsort(-values)
    ranked = values[order]
    equal = ranked[1:] == ranked[:-1]  # -0.0 == 0.0, as lexsort compares them
    ties = int(np.count_nonzero(equal))
    if ties == 0:
        return order
    run = np.cumsum(np.concatenate([[True], ~equal]))  # runs of equal values, numbered 1.. in order
    if ties > size // 16 and keys.size and int(keys.max()) < 2**62 // size:
        rank = np.empty(size, dtype=np.int64)
        rank[order] = run
        return np.argsort(rank * (int(keys.max()) + 1) + keys)  # unique keys: any sort is exact
    tied = np.zeros(size, dtype=bool)
    tied[1:] |= equal
    tied[:-1] |= equal
    at = np.flatnonzero(tied)
    rows = order[at]
    order[at] = rows[np.lexsort((keys[rows], run[at]))]
    return order


class Fused(Sequence):
    """The result of ``rrf_rows`` kept as arrays: a sequence of (row, score), best first.

    ``scores`` holds every row's fused score (0 for rows in no list). ``head(n)`` (and slices
    from the start) sorts only the rows that can be among the first ``n``; the full order is
    sorted once, when asked for. Ties keep first-seen order (list by list, rank by rank).
    """

    def __init__(self, scores: np.ndarray, first_seen: np.ndarray, lists: int = 0):
        self.scores = scores
        self.first_seen = first_seen
        self.lists = lists  # how many ranked lists were fused
        self.present = np.flatnonzero(first_seen != _UNSEEN)
        self._order: np.ndarray | None = None

    @property
    def order(self) -> np.ndarray:
        """All rows in any list, best first."""
        if self._order is None:
            self._order = self.present[order_desc(self.scores[self.present], self.first_seen[self.present])]
        return self._order

    def head_rows(self, n: int) -> np.ndarray:
        """The first ``n`` rows of ``order``."""
        if self._order is not None or n >= self.present.size:
            return self.order[:n]
        if n <= 0:
            return np.zeros(0, dtype=np.int64)
        values = self.scores[self.present]
        cut = np.partition(values, values.size - n)[values.size - n]  # the n-th best score
        candidates = self.present[values >= cut]  # every row that can be among the first n
        return candidates[np.lexsort((self.first_seen[candidates], -self.scores[candidates]))][:n]

    def head(self, n: int) -> list[tuple[int, float]]:
        rows = self.head_rows(n)
        return list(zip(rows.tolist(), self.scores[rows].tolist()))

    def __len__(self) -> int:
        return int(self.present.size)

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if start == 0 and step == 1:
                return self.head(stop)
            rows = self.order[index]
            return list(zip(rows.tolist(), self.scores[rows].tolist()))
        row = int(self.order[index])
        return row, float(self.scores[row])

    def __iter__(self):
        return iter(zip(self.order.tolist(), self.scores[self.order].tolist()))

    def __eq__(self, other):
        return list(self) == list(other)

    __hash__ = None


_UNSEEN = np.iinfo(np.int64).max


@functools.lru_cache(maxsize=16)
def _ranks_plus_k(k: int, size: int) -> np.ndarray:
    """``k + (1, 2, ..., size)`` as float64 (read-only, shared; a list of m rows uses its first m)."""
    out = k + np.arange(1, size + 1, dtype=np.float64)
    out.flags.writeable = False
    return out


def rrf_fuse(
    ranked_rows: Sequence[Sequence[int]],
    size: int,
    weights: Sequence[float] | None = None,
    k: int = RRF_K,
    *,
    start: Fused | None = None,
) -> Fused:
    """``rrf_rows`` as a lazily sorted ``Fused`` (same rows, scores and order).

    ``start``: the fusion of the first lists of ``ranked_rows`` (with the same weights and
    ``k``), which is then only extended by the others: a row's score is summed list by list in
    the same order, so the result is the same, bit for bit, as fusing all lists afresh."""
    weights = _weights(weights, len(ranked_rows), k)
    if start is None:
        done = 0
        scores = np.zeros(size, dtype=np.float64)
        first_seen = np.full(size, _UNSEEN, dtype=np.int64)
    else:
        done = start.lists
        if done > len(ranked_rows) or start.scores.size != size:
            raise ValueError(f"rrf_fuse: a start of {done} lists over {start.scores.size} rows does not fit")
        scores, first_seen = start.scores.copy(), start.first_seen.copy()
    seen_all = done > 0 and not (first_seen == _UNSEEN).any()  # then later lists cannot move a first sighting
    for i in range(done, len(ranked_rows)):
        rows, weight = np.asarray(ranked_rows[i], dtype=np.int64), weights[i]
        if rows.size == 0:
            continue
        scores[rows] += weight / (
            _ranks_plus_k(k, size)[: rows.size]
            if rows.size <= size
            else k + np.arange(1, rows.size + 1, dtype=np.float64)
        )
        if not seen_all:
            first_seen[rows] = np.minimum(first_seen[rows], i * size + np.arange(rows.size))
            seen_all = rows.size >= size and not (first_seen == _UNSEEN).any()
    return Fused(scores, first_seen, lists=len(ranked_rows))


def rrf_rows(
    ranked_rows: Sequence[Sequence[int]], size: int, weights: Sequence[float] | None = None, k: int = RRF_K
) -> list[tuple[int, float]]:
    """``rrf`` for lists of row numbers in ``range(size)``, vectorized (numpy).

    Same scores and order as ``rrf`` when no list repeats a row; a chat's ~1,600 messages in
    six lists fuse in well under a millisecond instead of ~10 ms in pure Python.
    """
    return list(rrf_fuse(ranked_rows, size, weights, k))
