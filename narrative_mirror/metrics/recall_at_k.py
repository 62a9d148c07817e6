from __future__ import annotations

from collections.abc import Iterable

from narrative_mirror.metrics._ids import distinct_top_k, id_set


def recall_at_k(ranked: Iterable[str], gold: Iterable[str], k: int) -> float | None:
    """|gold ∩ first k distinct ranked ids| / |gold|; None when ``gold`` is empty (not scorable)."""
    gold_set = id_set(gold, "gold")
    top = distinct_top_k(ranked, k)
    if not gold_set:
        return None
    return len(gold_set.intersection(top)) / len(gold_set)
