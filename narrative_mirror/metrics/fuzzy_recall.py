from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping

from narrative_mirror.metrics._ids import id_set


def fuzzy_recall(
    returned: Iterable[str], gold: Iterable[str], positions: Mapping[str, int], window: int = 3
) -> float | None:
    """Fraction of gold ids with a returned id at most ``window`` positions away.

    ``positions`` maps local_id -> 0-based message position in file order (across sessions),
    so the window crosses session boundaries. None when ``gold`` is empty. Every id must have a
    position: an unknown id is an error, not a silent miss.
    """
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise ValueError(f"window must be a non-negative integer, got {window!r}")
    gold_set = id_set(gold, "gold")
    returned_positions = sorted(_position(positions, doc_id, "returned") for doc_id in id_set(returned, "returned"))
    if not gold_set:
        return None
    hits = 0
    for gold_id in gold_set:
        gold_position = _position(positions, gold_id, "gold")
        nearest_at_or_after_start = bisect_left(returned_positions, gold_position - window)
        if (
            nearest_at_or_after_start < len(returned_positions)
            and returned_positions[nearest_at_or_after_start] <= gold_position + window
        ):
            hits += 1
    return hits / len(gold_set)


def _position(positions: Mapping[str, int], doc_id: str, what: str) -> int:
    try:
        return positions[doc_id]
    except KeyError:
        raise ValueError(f"fuzzy_recall: {what} id {doc_id!r} is not in positions") from None
