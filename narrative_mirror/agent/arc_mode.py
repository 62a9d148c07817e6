"""Arc mode's answer: the story's blocks (or, with no block layer, the best hits) segmented
into chronological phases (narrative.py), the LLM segmenter first when configured."""

from __future__ import annotations

from narrative_mirror.agent import narrative
from narrative_mirror.agent.addressed import addresses_the_reader
from narrative_mirror.agent.contract import ArcAnswer, Phase
from narrative_mirror.agent.result import run_info
from narrative_mirror.agent.state import AgentState, Run


def build_arc(state: AgentState, run: Run) -> None:
    phases, unknowns = arc_phases(run)
    run.result = ArcAnswer(phases=phases, Unknowns=unknowns, **run_info(run, state))


def arc_phases(run: Run) -> tuple[list[Phase], list[str]]:
    """Segment the story's blocks (or, with no block layer, the best message hits) into phases."""
    blocks: list[narrative.Block] = []
    scores: dict[str, float] = {}
    for block in run.story:
        # As in ask(): a message that addresses an AI is never evidence.
        members = [h for h in block.members if not addresses_the_reader(h.text)]
        scores.update((h.local_id, h.score) for h in block.members)
        if members:
            blocks.append(narrative.Block(block.block_id, members))
    if not run.story and run.pool:
        # No block layer: each hit of the selection is its own one-message block.
        for item in run.select(run.profile.arc_blocks):
            blocks.append(narrative.Block(item.hit.local_id, [item.hit]))
            scores[item.hit.local_id] = item.grade
    run.member_texts = {m.local_id: f"{m.speaker}: {m.text}" for b in blocks for m in b.members}
    phases: list[Phase] = []
    if blocks:
        phases = (
            run.ask_llm("segmenter", lambda: narrative.segment_llm(run.llm, run.question, blocks, scores), final=True)
            or []
        )
        if not phases:
            question_words = run.facets.target + run.facets.artifact
            phases = narrative.segment_offline(blocks, scores, question_words)
    run.selection = [lid for p in phases for lid in p.evidence]
    run.selection_scores = {lid: scores.get(lid, 0.0) for lid in run.selection}
    unknowns = [] if phases else ["No part of this chat tells this story."]
    if phases and any(len(p.evidence) < narrative.MIN_IDS for p in phases):
        unknowns.append(f"Fewer than {narrative.MIN_IDS} messages were found for the story")
    run.step(f"arc: {len(blocks)} blocks; {len(phases)} phases")
    return phases, unknowns
