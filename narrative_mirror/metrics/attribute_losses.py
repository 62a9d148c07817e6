from __future__ import annotations

from collections.abc import Iterable

from narrative_mirror.metrics._ids import id_list, id_set

# Where a gold id ended up, in pipeline order.
OUTCOMES = ("found", "never_candidate", "ranked_too_low", "dropped_at_selection")


def attribute_losses(
    gold: Iterable[str], candidates: Iterable[str], reranked_top: Iterable[str], selected: Iterable[str]
) -> dict[str, str]:
    """Map each gold id (in the given order, once) to the stage that lost it.

    - ``found``: in ``selected`` (even if it reached the selection some other way, e.g. as a
      neighbour of a selected message);
    - ``dropped_at_selection``: in ``reranked_top`` (what the selector saw) but not selected;
    - ``ranked_too_low``: among ``candidates`` but not in ``reranked_top``;
    - ``never_candidate``: retrieval never produced it.
    Membership is checked from the last stage backwards, so an id that a later stage added
    without it being a candidate is still attributed to the stage it reached.
    """
    candidate_set = id_set(candidates, "candidates")
    top_set = id_set(reranked_top, "reranked_top")
    selected_set = id_set(selected, "selected")
    outcome: dict[str, str] = {}
    for gold_id in id_list(gold, "gold"):
        if gold_id in selected_set:
            outcome[gold_id] = "found"
        elif gold_id in top_set:
            outcome[gold_id] = "dropped_at_selection"
        elif gold_id in candidate_set:
            outcome[gold_id] = "ranked_too_low"
        else:
            outcome[gold_id] = "never_candidate"
    return outcome
