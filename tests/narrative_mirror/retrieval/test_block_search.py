"""Block ranking on hand-made scores: per-block summaries and the fused order, exact values."""

import numpy as np

from narrative_mirror.retrieval.block_search import TOP_MEMBERS, member_summaries, rank_blocks


def test_member_summaries_best_and_sum_of_the_best_three_per_block():
    scores = np.array([0.1, 0.5, 0.2, 0.4, 0.3, 0.9, 0.0, 0.7])
    block_of = np.array([0, 0, 0, 0, 0, 2, -1, 2])  # block 1 is empty; row 6 is in no block
    best, top_sum = member_summaries(scores, block_of, 3)
    assert TOP_MEMBERS == 3
    assert best.tolist() == [0.5, 0.0, 0.9]
    assert np.allclose(top_sum, [0.5 + 0.4 + 0.3, 0.0, 0.9 + 0.7])


def test_blocks_rank_by_the_rrf_of_text_vector_and_message_lists():
    # Block 2 leads in three lists (BM25, best message, sum of the best three), block 0 leads
    # the vector list only; block 1 is second in BM25 and the vector list and has no scored message.
    scores = np.array([0.2, 0.0, 0.9, 0.8])
    block_of = np.array([0, 1, 2, 2])
    order, fused, lists = rank_blocks(
        scores, block_of, block_bm25=np.array([0.0, 1.0, 3.0]), block_cosine=np.array([0.9, 0.5, 0.1]), rrf_k=60
    )
    assert lists["block_bm25"].tolist() == [2, 1]  # a block without the query's words is not in it
    assert lists["block_vector"].tolist() == [0, 1, 2]
    assert lists["best_message"].tolist() == [2, 0]
    assert lists["top3_messages"].tolist() == [2, 0]
    assert order.tolist() == [2, 0, 1]
    assert np.allclose(fused, [3 / 61 + 1 / 63, 1 / 61 + 2 / 62, 2 / 62])
