from __future__ import annotations

from collections.abc import Iterable

from narrative_mirror.metrics._ids import distinct_top_k, id_set


def mrr_at_k(ranked: Iterable[str], gold: Iterable[str], k: int) -> float | None:
    """1 / rank of the first gold id among the first k distinct ranked ids, 0.0 if none.

    None when ``gold`` is empty. Averaged over questions this is MRR@k.
    """
    gold_set = id_set(gold, "gold")
    top = distinct_top_k(ranked, k)
    if not gold_set:
        return None
    for rank, doc_id in enumerate(top, start=1):
        if doc_id in gold_set:
            return 1.0 / rank
    return 0.0
