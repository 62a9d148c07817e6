"""What every agent answer reports about its run (``run_info``): route, budgets spent, stop
reason, degradation, flagged messages and the debug trace of its searches and selection."""

from __future__ import annotations

from narrative_mirror.agent.addressed import addresses_the_reader
from narrative_mirror.agent.contract import DebugTrace, RankedId
from narrative_mirror.agent.state import AgentState, Run
from narrative_mirror.retrieval.fusion import rrf


def _flagged_ids(run: Run) -> list[str]:
    """Messages the run saw (its pool, its story's blocks) that address an AI, in file order:
    kept as data, never evidence."""
    seen = {p.hit.local_id: p.hit for p in run.pool.values()} | {h.local_id: h for b in run.story for h in b.members}
    return sorted((i for i, h in seen.items() if addresses_the_reader(h.text)), key=lambda i: seen[i].position)


def run_info(run: Run, state: AgentState) -> dict:
    ranking = run.ranking_scores()
    return {
        "question": run.question,
        "chat_file": run.chat_file,
        "route": run.route,
        "profile": run.profile.name,
        "facets": run.facets,
        "rounds": state.get("round", 0),
        "calls": run.calls,
        "llm_calls": run.llm_calls,
        "fetches": run.fetches,
        "stop_reason": state.get("stop_reason") or "max_rounds",
        "coverage": run.coverage,
        "degraded": bool(run.degraded_reasons),
        "degraded_reason": "; ".join(run.degraded_reasons) or None,
        "flagged_ids": _flagged_ids(run),
        "trace": DebugTrace(
            candidates=[RankedId(id=str(i), score=s) for i, s in rrf(run.candidate_lists)]
            if run.candidate_lists
            else [],
            reranked=[RankedId(id=i, score=score) for i, score in ranking.items()],
            final=[
                RankedId(id=i, score=round(run.selection_scores[i], 6))
                for i in sorted(run.selection, key=lambda i: -run.selection_scores[i])
            ],
            queries=run.queries,
            searches=run.searches,
            steps=run.steps,
        ),
        "timings_ms": {k: round(v, 3) for k, v in run.timings_ms.items()},
    }
