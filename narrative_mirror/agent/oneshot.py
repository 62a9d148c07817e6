"""Deprecated one-shot path, kept for comparison with the agent: one search, then
segment_narrative over the full id sets of the hit blocks. No planner loop, no grader LLM,
no corrective rounds, no claim verification."""

from __future__ import annotations

import warnings
from typing import Any

from narrative_mirror.agent.answer import NO_ANSWER
from narrative_mirror.agent.arc_mode import arc_phases
from narrative_mirror.agent.contract import AgentAnswer, EvidenceItem
from narrative_mirror.agent.grading import FacetMatcher
from narrative_mirror.agent.planner import plan_offline
from narrative_mirror.agent.profiles import Profile
from narrative_mirror.agent.result import run_info
from narrative_mirror.agent.search_nodes import grade_offline, pull_story
from narrative_mirror.agent.state import Run
from narrative_mirror.llm import LLMClient

DEPRECATION = "mode='oneshot' is deprecated and kept only for comparison; use mode='agent'"


def run_oneshot(
    retriever: Any, chat_file: str, question: str, profile: Profile, llm: LLMClient | None = None
) -> AgentAnswer:
    warnings.warn(DEPRECATION, DeprecationWarning, stacklevel=3)
    run = Run(retriever=retriever, chat_file=chat_file, question=question, profile=profile, llm=llm, task="arc")
    route, run.facets, reason = plan_offline(question)
    run.route = "oneshot"
    run.matcher = FacetMatcher(run.facets)
    run.step(f"oneshot: facets from rules ({reason}; route would be {route})")
    for result in run.search_all([(question, "question")]):
        run.add_result(result)
    grade_offline(run)
    pull_story(run)
    phases, unknowns = arc_phases(run)
    evidence = [
        EvidenceItem(id=lid, text=run.member_texts[lid], point=f"phase {phase.name!r}")
        for phase in phases
        for lid in phase.evidence
    ]
    answer = " ".join(f"{phase.name}: {phase.summary}" for phase in phases) or NO_ANSWER
    info = run_info(run, {"round": 1, "stop_reason": "oneshot"})
    return AgentAnswer(mode="oneshot", Answer=answer, Evidence=evidence, Unknowns=unknowns, phases=phases, **info)
