"""The learned fusion's features of a candidate pool: one row per pool message, one column per
``learned_fusion.FEATURES`` entry (the hybrid lists' ranks, raw scores, neighbours' scores and the
message's own signals)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from narrative_mirror.retrieval import query_understanding
from narrative_mirror.retrieval.chat_index import ChatIndex, QueryScores
from narrative_mirror.retrieval.fusion import Fused
from narrative_mirror.retrieval.learned_fusion import FACT_SLOT_TYPES, FEATURES, neighbour_max_at


def pool_features(
    chat: ChatIndex,
    info: query_understanding.QueryInfo,
    lists: Mapping[str, np.ndarray],
    fused: Fused,
    pool: Sequence[int],
    scores: QueryScores,
    rrf_k: int,
) -> np.ndarray:
    """One row per ``pool`` row, one column per learned_fusion.FEATURES entry (in that order).

    Computed for the pool rows (and their neighbours) only: a list's ranks through one
    scatter, the per-message scores from ``scores`` (the ones the lists were built from)."""
    rows = np.asarray(pool, dtype=np.int64)
    columns: dict[str, np.ndarray] = {}
    for name, ranked_rows in lists.items():
        place = np.full(chat.size, -1, dtype=np.int64)
        place[ranked_rows] = np.arange(ranked_rows.size)
        at = place[rows]
        rr = np.zeros(rows.size)
        rr[at >= 0] = 1.0 / (rrf_k + (at[at >= 0] + 1))
        columns[f"rr_{name}"] = rr
    fused_score = fused.scores
    columns["fused"] = fused_score[rows]
    columns["fused_prev"] = np.where(rows > 0, fused_score[np.maximum(rows - 1, 0)], 0.0)
    columns["fused_next"] = np.where(rows < chat.size - 1, fused_score[np.minimum(rows + 1, chat.size - 1)], 0.0)
    values = {}
    for name, full in (("bm25", scores.bm25), ("bm25_window", scores.bm25_window)):
        best = full.max()
        values[name] = (lambda idx, full=full, best=best: full[idx] / best) if best > 0 else full.__getitem__
    values["cosine"] = scores.cosine.__getitem__
    values["cosine_window"] = scores.cosine_window.__getitem__
    for name, value_at in values.items():
        columns[name] = value_at(rows)
    for name in ("cosine", "bm25"):
        near1 = neighbour_max_at(values[name], chat.session_array, rows, 1)
        columns[f"{name}_near1"] = near1
        columns[f"{name}_near2"] = np.maximum(near1, neighbour_max_at(values[name], chat.session_array, rows, 2))
    columns["speaker_named"] = (
        chat.speaker_mask(info.persons, rows).astype(np.float64) if info.persons else np.zeros(rows.size)
    )
    columns["log_words"] = chat.log_words[rows]
    columns["is_question"] = chat.is_question[rows]
    columns["after_question"] = chat.after_question[rows]
    columns["first_person"] = chat.first_person[rows] * float(info.question_type not in FACT_SLOT_TYPES)
    columns["tier"] = chat.tier_array[rows]
    columns["refs"] = chat.refs_array[rows]
    columns["temporal"] = chat.temporal[rows]
    columns["when_x_temporal"] = chat.temporal[rows] * float(info.question_type == "when")
    out = np.empty((rows.size, len(FEATURES)))
    for j, name in enumerate(FEATURES):
        if name == "pool_rank":
            out[:, j] = 1.0 / np.sqrt(np.arange(1, rows.size + 1))
        elif name.startswith("rr_") and name not in columns:
            out[:, j] = 0.0  # that list was not built for this question (e.g. no speaker named)
        else:
            out[:, j] = columns[name]
    return out
