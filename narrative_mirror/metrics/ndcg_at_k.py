from __future__ import annotations

import math
from collections.abc import Iterable

from narrative_mirror.metrics._ids import distinct_top_k, id_set


def ndcg_at_k(ranked: Iterable[str], gold: Iterable[str], k: int) -> float | None:
    """nDCG@k with binary relevance: a gold id at 1-based rank r gains 1 / log2(r + 1).

    The ideal DCG puts min(|gold|, k) relevant ids on top. None when ``gold`` is empty.
    """
    gold_set = id_set(gold, "gold")
    top = distinct_top_k(ranked, k)
    if not gold_set:
        return None
    dcg = sum(1.0 / math.log2(rank + 1) for rank, doc_id in enumerate(top, start=1) if doc_id in gold_set)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(gold_set), k) + 1))
    return dcg / ideal
