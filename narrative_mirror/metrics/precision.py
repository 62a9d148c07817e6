from __future__ import annotations

from collections.abc import Iterable

from narrative_mirror.metrics._ids import id_set


def precision(returned: Iterable[str], gold: Iterable[str]) -> float | None:
    """|gold ∩ returned| / |returned| over the answer's (unordered) evidence set.

    0.0 when nothing is returned (an empty answer proves nothing); None when ``gold`` is empty,
    so that the question is left out of averages like every other metric. Unlike ranx's
    ``precision@k`` the denominator is the number of ids returned, not a cut-off k.
    """
    gold_set = id_set(gold, "gold")
    returned_set = id_set(returned, "returned")
    if not gold_set:
        return None
    if not returned_set:
        return 0.0
    return len(gold_set & returned_set) / len(returned_set)
