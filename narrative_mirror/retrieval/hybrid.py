"""The ranked message lists the hybrid variants fuse (``retrieval.toml`` ``[hybrid]`` weighs
each): BM25 and dense over messages and over their windows, then, in the fused order of those,
the messages of the best blocks / threads, of the persons the question names and of its time
window."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

import numpy as np

from narrative_mirror.retrieval import dense, query_understanding
from narrative_mirror.retrieval.chat_index import ChatIndex, QueryScores
from narrative_mirror.retrieval.fusion import order_desc, rrf_fuse
from narrative_mirror.retrieval.lexical import positive_order


def ranking(scores: np.ndarray) -> np.ndarray:
    """All rows, best score first (ties: lower row first)."""
    return order_desc(scores)


def spread(group_scores: np.ndarray, group_of: np.ndarray, tie_break: np.ndarray) -> np.ndarray:
    """Rows ranked by their group's score (rows in no group left out), ties in ``tie_break`` order."""
    if group_scores.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    groups = group_of[tie_break]
    rows = tie_break[groups >= 0]
    row_scores = group_scores[groups[groups >= 0]]
    if group_scores.min() >= 0:  # e.g. BM25: groups scoring 0 (mostly all but a few) come last, as they are
        positive = row_scores > 0
        ahead = rows[positive]
        ahead = ahead[order_desc(row_scores[positive])]  # ties: tie_break order (ahead keeps it)
        return np.concatenate([ahead, rows[~positive]])
    return rows[order_desc(row_scores)]  # ties: tie_break order (NaN too: order_desc sorts it as lexsort)


def hybrid_lists(
    chat: ChatIndex,
    info: query_understanding.QueryInfo,
    scores: QueryScores,
    lexical_rows: np.ndarray,
    h: Mapping,
    rrf_k: int,
) -> dict[str, np.ndarray]:
    """The ranked row lists by name for the query of ``scores`` (``lexical_rows``: its BM25
    ranking from the configured backend; ``h``: the ``[hybrid]`` settings); sets ``scores.base``,
    the fusion of the lists before the ones ordered by it."""
    query, qvec = scores.query, scores.qvec
    lists: dict[str, np.ndarray] = {"bm25": lexical_rows, "dense": ranking(scores.cosine)}
    if h["w_bm25_window"] > 0:
        lists["bm25_window"] = positive_order(scores.bm25_window)[0].astype(np.int64)
    if h["w_dense_window"] > 0:
        lists["dense_window"] = ranking(scores.cosine_window)
    scores.base = rrf_fuse(list(lists.values()), chat.size, [float(h[f"w_{n}"]) for n in lists], k=rrf_k)
    base_order = scores.base.order
    if h["w_block"] > 0 and chat.block_names:
        lists["block"] = spread(dense.cosine_scores(chat.block_vectors, qvec), chat.block_of, base_order)
    if h["w_block_bm25"] > 0 and chat.block_names:
        lists["block_bm25"] = spread(chat.block_bm25.scores(query), chat.block_of, base_order)
    if h["w_thread"] > 0 and chat.thread_names:
        row_thread = np.where(chat.block_of >= 0, chat.thread_of[np.maximum(chat.block_of, 0)], -1)
        lists["thread"] = spread(dense.cosine_scores(chat.thread_vectors, qvec), row_thread, base_order)
    if h["w_speaker"] > 0 and info.persons and len(info.persons) < len(chat.speaker_names):
        lists["speaker"] = base_order[chat.speaker_mask(info.persons, base_order)]
    if h["w_time"] > 0 and info.has_time:
        mask = query_understanding.time_mask(chat.times, info, timedelta(hours=h["time_slack_hours"]))
        if mask.any() and not mask.all():
            lists["time"] = base_order[mask[base_order]]
    return lists
