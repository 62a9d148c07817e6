"""The agentic-RAG design's "unknowns when needed": an abstention ("the chat does not tell") is right when it was
needed, that is when the question has no gold evidence (the chat does not answer it) or none of
its gold evidence is in what the search retrieved (the agent could not have proven an answer).

Per question ``abstention_needed``; over questions ``unknowns_when_needed``:
- ``unknowns_when_needed``: of the questions that needed an abstention, the share that abstained;
- ``unknowns_when_not_needed``: of those whose gold evidence was retrieved, the share that still
  abstained (a missed answer);
- ``abstention_decision_accuracy``: the share of questions whose abstain-or-answer decision matched
  the need.
Each is None when no question falls in its denominator.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from narrative_mirror.metrics._ids import id_set


def abstention_needed(gold: Iterable[str], retrieved: Iterable[str]) -> bool:
    """Whether an abstention is the right answer: no gold evidence, or none of it retrieved."""
    gold_set = id_set(gold, "gold")
    return not gold_set or not gold_set & id_set(retrieved, "retrieved")


def unknowns_when_needed(cases: Sequence[tuple[bool, Iterable[str], Iterable[str]]]) -> dict[str, float | None]:
    """The three rates over ``cases`` of (abstained, gold ids, retrieved ids)."""
    needed = [(bool(abstained), abstention_needed(gold, retrieved)) for abstained, gold, retrieved in cases]

    def share(values: list[bool]) -> float | None:
        return sum(values) / len(values) if values else None

    return {
        "unknowns_when_needed": share([a for a, need in needed if need]),
        "unknowns_when_not_needed": share([a for a, need in needed if not need]),
        "abstention_decision_accuracy": share([a == need for a, need in needed]),
    }
