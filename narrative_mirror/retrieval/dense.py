"""Dense (cosine) search over L2-normalized vectors held in memory.

An exact dot product over the whole matrix beats an approximate index at chat sizes (~0.2 ms for
1,600 x 384, ~3 ms for 44,720 x 384) and keeps rankings exact.
"""

from __future__ import annotations

import numpy as np


def normalize_rows(matrix: np.ndarray, chunk: int = 1024, *, in_place: bool = False) -> np.ndarray:
    """Rows scaled to unit length (zero rows become +0). Each row on its own, ``chunk`` rows at
    a time (the same numbers as one whole-matrix call, with temporaries that stay in cache);
    ``in_place``: into ``matrix`` itself (a float32 array the caller owns) instead of a copy."""
    matrix = np.asarray(matrix, dtype=np.float32)
    out = matrix if in_place else np.zeros_like(matrix)
    for start in range(0, matrix.shape[0], chunk):
        part = matrix[start : start + chunk]
        norms = np.linalg.norm(part, axis=1, keepdims=True)
        np.divide(part, norms, out=out[start : start + chunk], where=norms > 0)
        if in_place:
            out[start : start + chunk][norms[:, 0] == 0] = 0.0
    return out


def cosine_scores(matrix: np.ndarray, query_vector: np.ndarray) -> np.ndarray:
    """Cosine similarity of every row of ``matrix`` with ``query_vector`` (both unit length)."""
    if matrix.shape[0] == 0:
        return np.zeros(0, dtype=np.float32)
    if matrix.shape[1] != query_vector.shape[-1]:
        raise ValueError(
            f"dense search: query vector has {query_vector.shape[-1]} dimensions, the index "
            f"{matrix.shape[1]}: the chat was indexed with another embedder"
        )
    return matrix @ query_vector.reshape(-1)


def top_k(scores: np.ndarray, k: int | None = None, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
    """(row, score) best first (ties: lower row first); only rows in ``allowed`` if given."""
    rows = np.arange(scores.shape[0]) if allowed is None else np.asarray(allowed, dtype=np.int64)
    order = rows[np.lexsort((rows, -scores[rows]))]
    if k is not None:
        order = order[:k]
    return [(int(i), float(scores[i])) for i in order]


def cosine_scores_chunked(matrix: np.ndarray, query_vectors: np.ndarray, chunk: int = 512) -> np.ndarray:
    """Cosines of every query vector with every row of ``matrix``: ``out[i][r]`` is the cosine of
    ``matrix[r]`` and ``query_vectors[i]``, computed ``chunk`` rows at a time for all queries, so
    each stretch of the matrix is read from memory once, while it is in cache.

    The numbers equal ``cosine_scores`` up to float32 rounding, not always bit for bit: a BLAS
    adds up a row's products in an order that can depend on where the row falls in the call
    (measured: at most 1 ulp, ~6e-8). They never depend on the number of queries, so one query
    and a batch get identical scores."""
    matrix = np.asarray(matrix)
    queries = np.asarray(query_vectors, dtype=np.float32).reshape(len(query_vectors), -1)
    rows = matrix.shape[0]
    if rows and matrix.shape[1] != queries.shape[1]:
        cosine_scores(matrix, queries[0])  # raises the error naming the dimensions
    out = np.empty((queries.shape[0], rows), dtype=np.float32)
    for start in range(0, rows, chunk):
        part = matrix[start : start + chunk]
        for i, q in enumerate(queries):
            np.matmul(part, q, out=out[i, start : start + chunk])
    return out
