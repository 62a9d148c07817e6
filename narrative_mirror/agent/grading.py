"""Grades (0..1) of candidate messages and the coverage of the question's facets.

Offline grade = ``SCORE_WEIGHT`` * the retriever's reranked score relative to the best score of
the question's own search (clipped to 1) + the rest * facet coverage (artifact terms present,
target present as speaker or in the text). The score part ranks; the coverage part is absolute,
so a question the chat never answers gets low grades even for its best hit.
The LLM grader grades the same candidates 0..1; a message flagged as an instruction to an AI
can never be graded above its offline grade.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from narrative_mirror.agent.config import module_settings, setting
from narrative_mirror.agent.contract import Facets
from narrative_mirror.agent.text import stem, stems, tokens
from narrative_mirror.llm import DATA_BLOCK_NOTICE, LLMClient, MessageId, Number, format_messages_as_data
from narrative_mirror.settings import load_prompt

# agent.toml's [grading], read when used. score_weight: the score part ranks; the coverage part is
# absolute. target_weight: share of coverage that is "the target is involved" when both facets
# exist. must_have_min_grade: a must-have hit must also be a good candidate.
__getattr__ = module_settings(
    __name__,
    {
        "SCORE_WEIGHT": lambda: setting("grading", "score_weight"),
        "TARGET_WEIGHT": lambda: setting("grading", "target_weight"),
        "MUST_HAVE_MIN_GRADE": lambda: setting("grading", "must_have_min_grade"),
    },
)


@dataclass(frozen=True)
class FacetMatch:
    artifact_terms: frozenset[str]  # artifact stems found in the message
    artifact_fraction: float
    target: bool

    @property
    def matched(self) -> list[str]:
        return sorted(self.artifact_terms)


class FacetMatcher:
    """Matches messages against the question's facets (stems of artifact terms, target names)."""

    def __init__(self, facets: Facets, persons: Iterable[str] = ()):
        self.artifact = frozenset(stem(term) for a in facets.artifact for term in tokens(a))
        self.targets = [t.lower() for t in facets.target] + [p.lower() for p in persons]

    def match(self, speaker: str, text: str) -> FacetMatch:
        found = self.artifact & stems(text)
        fraction = len(found) / len(self.artifact) if self.artifact else 0.0
        lowered = f" {text.lower()} "
        target = any(t == speaker.lower() or f" {t}" in lowered or f"{t} " in lowered for t in self.targets)
        return FacetMatch(frozenset(found), fraction, target)

    def coverage(self, m: FacetMatch) -> float | None:
        """0..1, or None when the question has neither facet."""
        if self.artifact and self.targets:
            target_weight = setting("grading", "target_weight")
            return (1 - target_weight) * m.artifact_fraction + target_weight * float(m.target)
        if self.artifact:
            return m.artifact_fraction
        if self.targets:
            return float(m.target)
        return None

    def must_have(self, m: FacetMatch) -> bool:
        return bool(m.artifact_terms) if self.artifact else (m.target if self.targets else True)


def offline_grade(relative_score: float, coverage: float | None) -> float:
    score = min(1.0, max(0.0, relative_score))
    if coverage is None:
        return score
    score_weight = setting("grading", "score_weight")
    return score_weight * score + (1 - score_weight) * coverage


def top5_relevance(grades: Sequence[float]) -> float:
    """Mean of the five best grades (fewer when fewer exist; 0 when none)."""
    best = sorted(grades, reverse=True)[:5]
    return sum(best) / len(best) if best else 0.0


class GradeItem(BaseModel):
    id: MessageId
    grade: Number


class GradeReply(BaseModel):
    grades: list[GradeItem]


def llm_grades(llm: LLMClient, question: str, rows: Sequence[tuple[str, str, str]]) -> dict[str, float]:
    """Grades 0..1 for the given (id, speaker, text) messages; ids the LLM skips are absent."""
    system = load_prompt("agent_grader") + "\n" + DATA_BLOCK_NOTICE
    user = f"Question: {question}\n\nCandidate messages:\n{format_messages_as_data(rows)}"
    reply = llm.complete_json(system, user, GradeReply)
    known = {r[0] for r in rows}
    return {item.id: min(1.0, max(0.0, item.grade)) for item in reply.grades if item.id in known}
