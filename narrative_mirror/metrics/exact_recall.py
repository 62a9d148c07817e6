from __future__ import annotations

from collections.abc import Iterable

from narrative_mirror.metrics._ids import id_set


def exact_recall(returned: Iterable[str], gold: Iterable[str]) -> float | None:
    """|gold ∩ returned| / |gold| over the answer's (unordered) evidence set.

    None when ``gold`` is empty: some annotated questions have no resolvable evidence id and
    are left out of averages instead of counting as 0 or 1.
    """
    gold_set = id_set(gold, "gold")
    returned_set = id_set(returned, "returned")
    if not gold_set:
        return None
    return len(gold_set & returned_set) / len(gold_set)
