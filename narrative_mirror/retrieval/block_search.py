"""Block search: a chat's L1 topic blocks ranked for a query, for questions whose answer is a
span of the story (arc mode, the ``global`` route) rather than a few messages.

A block ranks by the RRF of four lists: BM25 of its text (label, summary, keywords, messages),
cosine of its vector, its best message and the sum of its ``TOP_MEMBERS`` best messages in the
message ranking (Retriever.search_blocks: the default variant's order of the candidate pool, then
hybrid order). Unweighted: weights chosen leave-one-chat-out did worse held out. Measured on the
42 TRAIN arc cases (Chat_1..7, learned fusion fitted without the case's chat), whole blocks, 8
per case: gold ids inside the chosen blocks .819 and gold phases touched .865; with hybrid
message ranks .797 / .837; the blocks of the agent's best hits .729 / .774; one list alone: best
message .765, BM25 .710, cosine .662 (hybrid ranks); the L2 thread's cosine as a fifth list, or
favouring the threads or neighbours of the first blocks, lowered it (.780 and below).
"""

from __future__ import annotations

import numpy as np

from narrative_mirror.retrieval.fusion import order_desc, rrf_fuse
from narrative_mirror.retrieval.lexical import positive_order

TOP_MEMBERS = 3


def member_summaries(message_scores: np.ndarray, block_of: np.ndarray, blocks: int,
                     top: int = TOP_MEMBERS) -> tuple[np.ndarray, np.ndarray]:
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


def rank_blocks(message_scores: np.ndarray, block_of: np.ndarray, block_bm25: np.ndarray,
                block_cosine: np.ndarray, rrf_k: int) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
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
