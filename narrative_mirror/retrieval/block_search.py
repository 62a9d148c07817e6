"""Block search: a chat's L1 topic blocks ranked for a query, for questions whose answer is a
span of the story (arc mode, the ``global`` route) rather than a few messages.

A block ranks by the RRF of four lists: BM25 of its text (label, summary, keywords, messages),
cosine of its vector, its best message and the sum of its ``TOP_MEMBERS`` best messages in the
message ranking (Retriever.search_blocks: the default variant's order of the candidate pool, then
hybrid order). Unweighted: weights chosen leave-one-chat-out did worse held out (measurements:
docs/decisions.md).
"""

from __future__ import annotations

import numpy as np

from narrative_mirror.retrieval import dense
from narrative_mirror.retrieval.chat_index import ChatIndex
from narrative_mirror.retrieval.fusion import order_desc, rrf_fuse
from narrative_mirror.retrieval.lexical import positive_order
from narrative_mirror.retrieval.records import BlockHit

TOP_MEMBERS = 3


def member_summaries(
    message_scores: np.ndarray, block_of: np.ndarray, blocks: int, top: int = TOP_MEMBERS
) -> tuple[np.ndarray, np.ndarray]:
    """Per block, the best score of its messages and the sum of its ``top`` best (0 for a block
    with none). ``block_of[row]`` is the row's block number, -1 for a row in no block."""
    rows = np.flatnonzero(block_of >= 0)
    best, top_sum = np.zeros(blocks), np.zeros(blocks)
    if rows.size == 0:
        return best, top_sum
    by_block = rows[np.lexsort((-message_scores[rows], block_of[rows]))]  # block, then best first
    owner = block_of[by_block]
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    rank_in_block = np.arange(owner.size) - np.repeat(starts, np.diff(np.r_[starts, owner.size]))
    best[owner[starts]] = message_scores[by_block[starts]]
    keep = rank_in_block < top
    np.add.at(top_sum, owner[keep], message_scores[by_block[keep]])
    return best, top_sum


def rank_blocks(
    message_scores: np.ndarray, block_of: np.ndarray, block_bm25: np.ndarray, block_cosine: np.ndarray, rrf_k: int
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """(block numbers best first, their RRF scores, the four ranked lists by name)."""
    blocks = block_cosine.size
    best, top_sum = member_summaries(message_scores, block_of, blocks)
    lists = {
        "block_bm25": positive_order(block_bm25)[0].astype(np.int64),
        "block_vector": order_desc(block_cosine.astype(np.float64)),
        "best_message": positive_order(best)[0].astype(np.int64),
        f"top{TOP_MEMBERS}_messages": positive_order(top_sum)[0].astype(np.int64),
    }
    fused = rrf_fuse(list(lists.values()), blocks, [1.0] * len(lists), k=rrf_k)
    order = fused.order
    return order, fused.scores[order], lists


def search_blocks(
    chat: ChatIndex,
    ranked_rows: np.ndarray,
    hybrid_order: np.ndarray,
    search_query: str,
    qvec: np.ndarray,
    rrf_k: int,
    k: int,
) -> list[BlockHit]:
    """The ``k`` best blocks of ``chat``, each with every message it holds. A message scores by its
    rank in the message ranking (``ranked_rows``, the search's pool, then the other rows in
    ``hybrid_order``) as (rrf_k + 1) / (rrf_k + rank): 1 for the best, 0 for a message no list found."""
    rows = np.concatenate([ranked_rows, hybrid_order[~np.isin(hybrid_order, ranked_rows)]])
    message_scores = np.zeros(chat.size)
    message_scores[rows] = (rrf_k + 1) / (rrf_k + 1 + np.arange(rows.size))
    order, block_scores, lists = rank_blocks(
        message_scores,
        chat.block_of,
        chat.block_bm25.scores(search_query),
        dense.cosine_scores(chat.block_vectors, qvec),
        rrf_k,
    )
    ranked_by = {name: set(blocks[:k].tolist()) for name, blocks in lists.items()}
    out = []
    for b, score in zip(order[:k].tolist(), block_scores[:k].tolist()):
        thread = int(chat.thread_of[b])
        out.append(
            BlockHit(
                block_id=chat.block_names[b],
                score=score,
                thread_id=chat.thread_names[thread] if thread >= 0 else None,
                members=[chat.hit(r, float(message_scores[r]), sources=["blocks"]) for r in sorted(chat.block_rows[b])],
                sources=[name for name, top in ranked_by.items() if b in top],
            )
        )
    return out
