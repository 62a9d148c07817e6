"""ARC (narrative arc) metrics: a case's gold evidence is a list of phases in time order."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from narrative_mirror.metrics._ids import id_list, id_set

ARC_METRIC_KEYS = ("global_recall", "phase_coverage", "phase_order")


def arc_global_recall(gold_phases: Sequence[Iterable[str]], found: Iterable[str]) -> float | None:
    """Evidence ids of all phases that were found / all evidence ids; None when there are none."""
    phase_of = _gold_phase_of(gold_phases)
    if not phase_of:
        return None
    return len(phase_of.keys() & id_set(found, "found")) / len(phase_of)


def arc_phase_coverage(gold_phases: Sequence[Iterable[str]], found: Iterable[str]) -> float | None:
    """Phases with at least one evidence id found / phases with evidence.

    A phase left without ids (e.g. all of them unresolvable) cannot be covered and is not
    counted; None when no phase has ids.
    """
    phase_of = _gold_phase_of(gold_phases)
    found_set = id_set(found, "found")
    phases = set(phase_of.values())
    if not phases:
        return None
    covered = {phase_of[doc_id] for doc_id in phase_of.keys() & found_set}
    return len(covered) / len(phases)


def arc_phase_order(gold_phases: Sequence[Iterable[str]], predicted_phases: Sequence[Iterable[str]]) -> float | None:
    """Agreement of the predicted phase order with the gold phase order.

    Over every pair of found gold ids (a, b) with a in an earlier gold phase than b: 1 if a's
    predicted phase comes before b's, 0.5 if both are in the same predicted phase, 0 if after;
    the score is the mean (a concordance, like an AUC with ties at 0.5). A flat, unphased answer
    therefore scores 0.5. An id listed in several predicted phases counts at the first one.
    None when there is no such pair (fewer than two gold phases found): order cannot be judged,
    and a 1.0 would reward answers that found almost nothing.
    """
    phase_of = _gold_phase_of(gold_phases)
    predicted_phase_of: dict[str, int] = {}
    for index, phase in enumerate(_phase_list(predicted_phases, "predicted_phases")):
        for doc_id in id_list(phase, f"predicted_phases[{index}]"):
            predicted_phase_of.setdefault(doc_id, index)
    found = [(phase_of[doc_id], predicted_phase_of[doc_id]) for doc_id in phase_of if doc_id in predicted_phase_of]
    pair_scores = [
        1.0 if predicted_a < predicted_b else 0.5 if predicted_a == predicted_b else 0.0
        for gold_a, predicted_a in found
        for gold_b, predicted_b in found
        if gold_a < gold_b
    ]
    if not pair_scores:
        return None
    return sum(pair_scores) / len(pair_scores)


def arc_case_metrics(
    gold_phases: Sequence[Iterable[str]], predicted_phases: Sequence[Iterable[str]]
) -> dict[str, float | None]:
    """All ARC metrics of one case, keyed by ``ARC_METRIC_KEYS``; found = union of predicted phases."""
    predicted = _phase_list(predicted_phases, "predicted_phases")
    found = {doc_id for index, phase in enumerate(predicted) for doc_id in id_list(phase, f"predicted_phases[{index}]")}
    return {
        "global_recall": arc_global_recall(gold_phases, found),
        "phase_coverage": arc_phase_coverage(gold_phases, found),
        "phase_order": arc_phase_order(gold_phases, predicted),
    }


def _phase_list(phases: Sequence[Iterable[str]], what: str) -> list[list[str]]:
    return [id_list(phase, f"{what}[{index}]") for index, phase in enumerate(id_list(phases, what))]


def _gold_phase_of(gold_phases: Sequence[Iterable[str]]) -> dict[str, int]:
    """local_id -> index of its gold phase; an id in two phases is an error (one phase per id)."""
    phase_of: dict[str, int] = {}
    for index, phase in enumerate(_phase_list(gold_phases, "gold_phases")):
        for doc_id in phase:
            earlier = phase_of.setdefault(doc_id, index)
            if earlier != index:
                raise ValueError(
                    f"gold_phases: evidence id {doc_id!r} is in phases {earlier} and {index}; "
                    "an id belongs to one phase only"
                )
    return phase_of
