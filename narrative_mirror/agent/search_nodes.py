"""The agent's search nodes: planner (facets and route), retriever (the question's search and
its variants or sub-questions; arc mode pulls the story's blocks), grader, coverage (stop or go
on) and corrective (re-searches for facets the evidence does not cover yet)."""

from __future__ import annotations

from narrative_mirror.agent.config import module_settings, setting
from narrative_mirror.agent.grading import FacetMatcher, llm_grades, offline_grade, top5_relevance
from narrative_mirror.agent.planner import plan_llm, plan_offline
from narrative_mirror.agent.rewrite import corrective_variants, facet_variants, llm_variants, sub_queries
from narrative_mirror.agent.state import AgentState, Run
from narrative_mirror.agent.text import stem

# [selection] leaf_context: leaf messages shown to the LLM rewriter.
__getattr__ = module_settings(__name__, {"LEAF_CONTEXT": lambda: setting("selection", "leaf_context")})


def planner(state: AgentState, run: Run) -> dict:
    planned = run.ask_llm("planner", lambda: plan_llm(run.llm, run.question))
    route, facets, reason = planned or plan_offline(run.question)
    if run.task == "arc":
        route, reason = "global", f"{reason}; arc mode is always global"
    run.route, run.facets = route, facets
    run.matcher = FacetMatcher(facets)
    run.step(f"planner: route={route} ({reason}); facets={facets.model_dump()}")
    return {"round": 0, "stop_reason": None, "no_new_streak": 0}


def retriever(state: AgentState, run: Run) -> dict:
    round_no = state["round"] + 1
    limit = run.profile.rewrite_candidates
    new = 0
    if round_no == 1 and run.task == "arc" and pull_story(run):
        return {"round": round_no}
    if round_no == 1:
        # multi_hop searches its sub-questions (each person, each side); a question that does not
        # split, and every other route, its facet variants.
        subs = sub_queries(run.question, run.facets, limit) if run.route == "multi_hop" else []
        variants = [(q, "sub_query") for q in subs] or [
            (q, "variant") for q in facet_variants(run.question, run.facets, limit)
        ]
        # Offline the variants are known before the first search: encode them together with it.
        results = run.search_all([(run.question, "question")] + ([] if run.llm_active else variants))
        if results and run.llm_active:
            leaf = [(h.local_id, h.speaker, h.text) for h in results[0].hits[: setting("selection", "leaf_context")]]
            rewrites = None
            if leaf and not subs:  # sub-questions are searched as they are
                rewrites = run.ask_llm("rewrite", lambda: llm_variants(run.llm, run.question, leaf, limit))
            results += run.search_all([(q, "rewrite") for q in rewrites] if rewrites is not None else variants)
    else:
        results = run.search_all(run.pending)
    for result in results:
        new += run.add_result(result)
    if round_no == 1 and run.task == "ask" and run.route == "global" and run.pool and run.can_call():
        # A story question: the blocks that tell it, beside the messages that match it best.
        new += run.add_span(run.search_blocks(run.profile.max_evidence_fetches))
    run.step(f"retriever: round {round_no}: {len(results)} searches, {new} new candidates, pool {len(run.pool)}")
    return {"round": round_no}


def pull_story(run: Run) -> bool:
    """Arc mode: one call, the chat's best blocks for the story, each with all its messages (the
    block search ranks their messages itself, so no message search is needed). False when the
    chat has no blocks (the message searches then stand in) or the budget allows no call."""
    if not run.can_call():
        return False
    run.story = run.search_blocks(run.profile.arc_blocks)
    run.fetches += len(run.story)
    run.candidate_lists.append(list(run.ranking_scores()))
    run.step(f"retriever: {len(run.story)} blocks pulled whole, {len(run.candidate_lists[-1])} messages")
    return bool(run.story)


def grade_offline(run: Run) -> None:
    """Offline grades of the pool; LLM grades stay."""
    for item in run.pool.values():
        item.offline = offline_grade(item.relative, run.matcher.coverage(item.match))
        if not item.llm_graded:
            item.grade = item.offline


def grader(state: AgentState, run: Run) -> dict:
    grade_offline(run)
    todo = [p for p in sorted(run.pool.values(), key=lambda p: -p.offline) if not p.llm_graded][
        : run.profile.first_search
    ]
    if todo:
        rows = [(p.hit.local_id, p.hit.speaker, p.hit.text) for p in todo]
        graded = run.ask_llm("grader", lambda: llm_grades(run.llm, run.question, rows))
        for item in todo if graded is not None else []:
            if item.hit.local_id in graded:
                grade = graded[item.hit.local_id]
                item.grade = min(grade, item.offline) if item.flagged else grade
                item.llm_graded = True
    selection = {p.hit.local_id for p in run.select(run.profile.max_evidence_fetches)}
    new_evidence = selection - run.seen_evidence
    run.seen_evidence |= selection
    streak = 0 if new_evidence else state["no_new_streak"] + 1
    run.step(f"grader: {len(new_evidence)} new evidence ids {sorted(new_evidence)}")
    return {"no_new_streak": streak}


def coverage(state: AgentState, run: Run) -> dict:
    profile = run.profile
    # A message that talks to an AI never counts towards coverage: it must not end the search.
    grades = [p.grade for p in run.pool.values() if not p.flagged]
    chosen = run.select(profile.max_evidence_fetches)
    must = sum(
        1 for p in chosen if run.matcher.must_have(p.match) and p.grade >= setting("grading", "must_have_min_grade")
    )
    top5 = top5_relevance(grades)
    run.coverage = {"top5_relevance": round(top5, 4), "must_have_hits": must}
    if run.story:
        reason = "story_found"
    elif not run.pool:
        reason = "no_hits"
    elif top5 >= profile.min_top5_relevance and must >= profile.min_must_have_hits:
        reason = "coverage_met"
    elif state["no_new_streak"] >= 2:
        reason = "no_new_evidence"
    elif state["round"] >= profile.max_rounds:
        reason = "max_rounds"
    elif run.budget_hit or not run.can_call():
        reason = "budget_calls"
    else:
        reason = None
    run.step(
        f"coverage: top5={top5:.3f} (min {profile.min_top5_relevance}), must_have={must} "
        f"(min {profile.min_must_have_hits}) -> {reason or 'corrective'}"
    )
    return {"stop_reason": reason}


def corrective(state: AgentState, run: Run) -> dict:
    top = run.ranked()[:3]
    covered = set().union(*(p.match.artifact_terms for p in top)) if top else set()
    uncovered = [a for a in run.facets.artifact if stem(a) not in covered]
    limit = run.profile.rewrite_candidates
    leaf = [(p.hit.local_id, p.hit.speaker, p.hit.text) for p in run.ranked()[: setting("selection", "leaf_context")]]
    rewrites = run.ask_llm("rewrite", lambda: llm_variants(run.llm, run.question, leaf, limit))
    if rewrites is not None:
        run.pending = [(q, "rewrite") for q in rewrites if q not in run.queries]
    else:
        run.pending = [
            (q, "corrective")
            for q in corrective_variants(
                run.question, run.facets, uncovered, [p.hit.text for p in top], run.queries, limit
            )
        ]
    run.step(f"corrective: uncovered facets {uncovered}; re-search {[q for q, _ in run.pending]}")
    return {}
