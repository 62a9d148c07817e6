"""The agent as a LangGraph StateGraph.

    planner -> retriever -> grader -> coverage --(corrective -> retriever)*--> generator -> verification

- planner: facets and route (rules, or the LLM when configured; it only ever sees the question).
- retriever: the first search (``profile.first_search`` hits), then the route's searches: the
  sub-questions of a ``multi_hop`` question, else query variants (facet-driven offline, or LLM
  rewrites grounded on the leaf messages of that first search).
- grader: 0..1 grades (retriever scores + facet coverage offline; the LLM grader when configured).
- coverage: stop when covered (top-5 relevance and must-have hits reach the profile's
  thresholds), after two rounds in a row without new evidence, at ``max_rounds``, or when the
  call budget cannot pay for another search; otherwise the corrective step plans facet-driven
  re-searches for facets the evidence does not cover yet.
- generator: pulls the selected evidence by id and drafts claims (extractive offline, LLM
  otherwise); in arc mode it pulls the full id sets of the hit blocks and segments them into phases.
- verification: keeps the claims the evidence supports; the rest go to Unknowns.

Budgets: every search, fetch and LLM call costs one call; the calls the final steps need are
reserved up front, so a run never exceeds ``profile.max_calls``. The first LLM failure
(timeout, HTTP error, malformed answer) switches the rest of the run to the offline path and
marks the answer degraded.

State: the question's whole working memory is the graph state (``AgentState``: searches, pool,
budgets, trace lines, evidence, answer; lists appended and counts added by reducers), so a
LangGraph checkpointer keeps every step and ``stream`` shows each node as it finishes. The
resources (retriever, profile, LLM client) come with the run's config, not the state.
"""

from __future__ import annotations

import copy
import dataclasses
import operator
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypedDict, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

from narrative_mirror.agent import answer as answer_mod
from narrative_mirror.agent import narrative
from narrative_mirror.agent.contract import (
    AgentAnswer,
    ArcAnswer,
    ClaimCheck,
    DebugTrace,
    EvidenceItem,
    Facets,
    Phase,
    RankedId,
    Route,
    SearchKind,
    SearchTrace,
)
from narrative_mirror.agent.grading import (
    MUST_HAVE_MIN_GRADE,
    FacetMatch,
    FacetMatcher,
    llm_grades,
    offline_grade,
    top5_relevance,
)
from narrative_mirror.agent.planner import plan_llm, plan_offline
from narrative_mirror.agent.profiles import Profile
from narrative_mirror.agent.rewrite import corrective_variants, facet_variants, llm_variants, sub_queries
from narrative_mirror.agent.text import looks_like_injection, stem
from narrative_mirror.llm import LLMClient, LLMError
from narrative_mirror.retrieval.fusion import rrf

Task = Literal["ask", "arc"]
T = TypeVar("T")

# Ranking and selection follow the question's own search (the retriever's order): on the 7
# train chats, leave-one-chat-out (LOCO, 498 questions, balanced, offline), re-ordering by
# grade cost recall@10 (.667 vs the retriever's .703), and selecting by grade gave exact recall
# .52 / precision .398 where "relative retriever score >= SELECT_RELATIVE_SCORE within the first
# max_evidence_fetches" gave .560 / .412 (the threshold picked by LOCO: .5 in all 7 folds;
# .4 / .6 / .7 / .8 lost). Variant and corrective hits rank after the question's hits.
# multi_hop searches its sub-questions; adding each sub-question's best hit to the evidence when
# no selected id covers it measured exact recall +.001, precision -.007 (LOCO): not done.
# An LLM grade (when configured) is a veto: an item it grades below SELECT_MIN_GRADE is not
# selected, and LLM-graded variant hits reaching SELECT_MIN_GRADE may be.
# Covering question terms the chosen evidence lacks (COVER_MIN_GRADE): LOCO exact recall .560 at
# .5 / .65 / off, precision .396 / .410 / .411; kept at .65 for answers ("Where was Lena's dad
# operated on?": the message that says "operated").
SELECT_RELATIVE_SCORE = 0.5
SELECT_MIN_GRADE = 0.45
COVER_MIN_GRADE = 0.65
# Variant hits weigh less than the question's own (relative score, arc mode excepted). Agent on
# the 7 train chats (502 QA, balanced): variant weight 1.0 -> recall@10 .626; 0.4 -> .670.
VARIANT_WEIGHT = 0.4
LEAF_CONTEXT = 5  # leaf messages shown to the LLM rewriter
# Global route (ask): a block found by the block search joins the answer's span when its RRF score
# is at least this share of the best block's (a block leading every list scores 4/61, one 4th in
# every list 4/64 = .94 of it). Hand-set: only 2 of the 502 train questions route global.
SPAN_BLOCK_RELATIVE = 0.9


@dataclass
class PoolItem:
    hit: Any  # retrieval.engine.Hit
    relative: float  # best retriever score relative to the question search's best
    match: FacetMatch
    offline: float
    grade: float
    flagged: bool
    llm_graded: bool = False


# Run fields that live in the graph state, by how a node's update is merged: appended, added up,
# or replaced. The resources (retriever, profile, llm) come with the run's config.
APPENDED = ("steps", "searches", "candidate_lists", "degraded_reasons")
COUNTED = ("calls", "llm_calls", "fetches")
REPLACED = ("chat_file", "question", "task", "route", "facets", "pool", "pending", "seen_evidence", "top_score",
            "persons", "span", "story", "coverage", "budget_hit", "result", "selection", "selection_scores", "member_texts",
            "evidence", "draft")


@dataclass
class Run:
    """One node's view of a question's working memory: built from the graph state and the run's
    resources (``from_state``), worked on by the node, returned as the state update (``update``)."""

    retriever: Any
    chat_file: str
    question: str
    profile: Profile
    llm: LLMClient | None
    task: Task
    route: Route = "direct"
    facets: Facets | None = None
    matcher: FacetMatcher | None = None
    calls: int = 0
    llm_calls: int = 0
    fetches: int = 0
    pool: dict[str, PoolItem] = field(default_factory=dict)
    candidate_lists: list[list[str]] = field(default_factory=list)
    searches: list[SearchTrace] = field(default_factory=list)
    pending: list[tuple[str, SearchKind]] = field(default_factory=list)
    seen_evidence: set[str] = field(default_factory=set)
    top_score: float | None = None
    persons: list[str] = field(default_factory=list)
    span: list[str] = field(default_factory=list)  # global route: the best message of each block found, best block first
    story: list[Any] = field(default_factory=list)  # arc mode: the blocks found (BlockHit, each whole), best first
    steps: list[str] = field(default_factory=list)
    degraded_reasons: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    coverage: dict[str, float] = field(default_factory=dict)
    budget_hit: bool = False
    result: AgentAnswer | ArcAnswer | None = None
    # Filled by the generator for verification.
    selection: list[str] = field(default_factory=list)
    selection_scores: dict[str, float] = field(default_factory=dict)
    member_texts: dict[str, str] = field(default_factory=dict)  # "speaker: text" of pulled block members
    evidence: list[answer_mod.EvidenceMessage] = field(default_factory=list)
    draft: tuple[str, list[answer_mod.Claim], list[str]] | None = None

    _start: dict[str, int] = field(default_factory=dict, repr=False)  # APPENDED lengths, COUNTED values at start

    @classmethod
    def from_state(cls, state: AgentState, config: RunnableConfig) -> Run:
        resources = config["configurable"]
        values = {name: state[name] for name in (*APPENDED, *COUNTED, *REPLACED, "timings_ms") if name in state}
        # A node changes lists, sets and pool items in place: it gets its own copies, so the state
        # (and a checkpoint of it) stays as it was until the node's update is merged.
        values = {name: copy.copy(value) if isinstance(value, (list, dict, set)) else value
                  for name, value in values.items()}
        values["pool"] = {lid: dataclasses.replace(item) for lid, item in values.get("pool", {}).items()}
        run = cls(retriever=resources["retriever"], profile=resources["profile"], llm=resources["llm"], **values)
        if run.facets is not None:
            run.matcher = FacetMatcher(run.facets, run.persons)
        run._start = {name: len(getattr(run, name)) for name in APPENDED} | {name: getattr(run, name) for name in COUNTED}
        return run

    def update(self) -> dict[str, Any]:
        """What the node changed, as a state update: new items of APPENDED lists, increments of
        COUNTED numbers, the REPLACED values."""
        return ({name: getattr(self, name)[self._start.get(name, 0):] for name in APPENDED}
                | {name: getattr(self, name) - self._start.get(name, 0) for name in COUNTED}
                | {name: getattr(self, name) for name in REPLACED})

    @property
    def queries(self) -> list[str]:
        return [search.query for search in self.searches]

    @property
    def llm_active(self) -> bool:
        return self.llm is not None and not self.degraded_reasons

    @property
    def reserve(self) -> int:
        """Calls kept for the final steps: for an answer, the evidence pull and the LLM's generator
        and verifier; for a story (whose blocks come first, or never), the LLM's segmenter."""
        if self.task == "arc":
            return 1 if self.llm_active else 0
        return 1 + (2 if self.llm_active else 0)

    def can_call(self, final: bool = False) -> bool:
        ok = self.calls + 1 + (0 if final else self.reserve) <= self.profile.max_calls
        if not ok and not final:
            self.budget_hit = True
        return ok

    def step(self, text: str) -> None:
        self.steps.append(text)

    # --- tool calls -------------------------------------------------------------------------

    def search_all(self, queries: list[tuple[str, SearchKind]]) -> list[Any]:
        """Search the (query, kind) pairs the budget allows, their vectors encoded in one batch."""
        affordable = queries[: max(0, self.profile.max_calls - self.calls - self.reserve)]
        for query, _ in queries[len(affordable):]:
            self.budget_hit = True
            self.step(f"retriever: budget: skipped search {query!r}")
        self.calls += len(affordable)
        variant = self.retriever.story_variant if self.task == "arc" else None
        results = self.retriever.search_many(self.chat_file, [q for q, _ in affordable], k=self.profile.first_search,
                                             variant=variant)
        for (query, kind), result in zip(affordable, results):
            self.searches.append(SearchTrace(query=query, kind=kind, found=[h.local_id for h in result.hits]))
        return results

    def search_blocks(self, k: int) -> list[Any]:
        """One call: the chat's ``k`` best blocks for the question, each whole."""
        self.calls += 1
        found = self.retriever.search_blocks(self.chat_file, self.question, k=k)
        self.searches.append(SearchTrace(query=self.question, kind="blocks", found=[b.block_id for b in found]))
        return found

    def ask_llm(self, node: str, call: Callable[[], T], final: bool = False) -> T | None:
        """One LLM call within budget; None (and the run degraded) when it fails."""
        if not self.llm_active or not self.can_call(final=final):
            return None
        self.calls += 1
        self.llm_calls += 1
        try:
            return call()
        except LLMError as exc:
            self.degraded_reasons.append(f"{node}: {exc}")
            self.step(f"{node}: LLM failed ({exc.kind}); offline path from here on")
            return None

    # --- pool -------------------------------------------------------------------------------

    def add_result(self, result: Any) -> int:
        """Merge one search result into the pool; returns how many ids are new."""
        self.candidate_lists.append([lid for lid, _ in result.trace.candidates])
        if self.top_score is None:
            self.top_score = max((h.score for h in result.hits), default=0.0)
            self.persons = list(result.query_info.get("persons") or [])
            self.matcher = FacetMatcher(self.facets, self.persons)
        # For a point question, hits of query variants count less than the question's own: a
        # variant stresses one reading of the question, its best hit is less sure. A story
        # wants the breadth the variants bring, so arc mode weighs them fully.
        weight = 1.0 if len(self.candidate_lists) == 1 or self.task == "arc" else VARIANT_WEIGHT
        return self._merge([(hit, weight * (hit.score / self.top_score if self.top_score and self.top_score > 0
                                            else 1.0 / rank)) for rank, hit in enumerate(result.hits, start=1)])

    def add_span(self, blocks: list[Any]) -> int:
        """Global route: merge the best message of each block of a block search that scores at
        least SPAN_BLOCK_RELATIVE of the best block (scored as a variant's hits, on the block
        search's own relative scale); returns how many ids are new."""
        top = max((block.score for block in blocks), default=0.0)
        best = [max(block.members, key=lambda h: h.score) for block in blocks
                if block.members and block.score >= SPAN_BLOCK_RELATIVE * top]
        self.candidate_lists.append([h.local_id for h in best])
        self.span = [h.local_id for h in best]
        return self._merge([(h, VARIANT_WEIGHT * h.score) for h in best])

    def _merge(self, scored: list[tuple[Any, float]]) -> int:
        """Put (hit, relative score) pairs into the pool; an id already there keeps its best score."""
        new = 0
        for hit, relative in scored:
            item = self.pool.get(hit.local_id)
            if item is None:
                match = self.matcher.match(hit.speaker, hit.text)
                self.pool[hit.local_id] = PoolItem(
                    hit=hit, relative=relative, match=match, offline=0.0, grade=0.0,
                    flagged=looks_like_injection(hit.text),
                )
                new += 1
            elif relative > item.relative:
                item.relative = relative
                item.llm_graded = False  # re-grade with the better score
        return new

    def ranked(self) -> list[PoolItem]:
        """The pool in the order its ids were first found: the question's search, then variants."""
        return list(self.pool.values())

    def ranking_scores(self) -> dict[str, float]:
        """The ranked pool's scores: relative retriever scores, never above an earlier item's
        (a variant's hit can score above a late hit of the question yet ranks after it). In arc
        mode with a story: its blocks' messages by the block search's message scores."""
        if self.story:
            members = sorted((h for block in self.story for h in block.members), key=lambda h: (-h.score, h.position))
            return {h.local_id: round(h.score, 6) for h in members}
        scores, ceiling = {}, float("inf")
        for item in self.ranked():
            ceiling = min(ceiling, item.relative)
            scores[item.hit.local_id] = round(ceiling, 6)
        return scores

    def select(self, limit: int) -> list[PoolItem]:
        """Final evidence, at most ``limit``: offline, the items among the first ``limit`` whose
        relative score reaches SELECT_RELATIVE_SCORE, in ranked order; an LLM grade decides for the
        items it graded; the best item always, if there is one. Then, for each question term they
        leave uncovered, the best-graded item with that term (grade >= COVER_MIN_GRADE). A message
        that addresses an AI is never selected: it stays in the trace as data, and can neither
        become evidence nor push real evidence out of the budget."""
        ranked = [p for p in self.ranked() if not p.flagged]
        if not ranked:
            return []
        chosen = [
            p for index, p in enumerate(ranked)
            if (p.grade >= SELECT_MIN_GRADE if p.llm_graded else index < limit and p.relative >= SELECT_RELATIVE_SCORE)
        ][:limit] or ranked[:1]
        # A question term no chosen message contains: the best-graded pool item that has it.
        uncovered = set(self.matcher.artifact) - set().union(*(p.match.artifact_terms for p in chosen))
        extra = []
        for p in sorted(ranked, key=lambda p: -p.grade):
            if not uncovered or len(chosen) + len(extra) >= limit:
                break
            if p not in chosen and p.grade >= COVER_MIN_GRADE and p.match.artifact_terms & uncovered:
                extra.append(p)
                uncovered -= p.match.artifact_terms
        # Global route: the story's span, the best message of each block the block search found
        # that no chosen message stands for yet.
        blocks = {p.hit.block_id for p in chosen + extra}
        for lid in self.span:
            item = self.pool.get(lid)
            if len(chosen) + len(extra) >= limit:
                break
            if item is not None and not item.flagged and item.hit.block_id not in blocks:
                extra.append(item)
                blocks.add(item.hit.block_id)
        return chosen + extra


def _add_times(left: dict[str, float], right: dict[str, float]) -> dict[str, float]:
    return {name: left.get(name, 0.0) + right.get(name, 0.0) for name in left | right}


class AgentState(TypedDict, total=False):
    """The graph's state: the question's whole working memory (checkpointed, streamed)."""

    # the question
    chat_file: str
    question: str
    task: Task
    # control flow
    round: int
    stop_reason: str | None
    no_new_streak: int
    # plan and searches
    route: Route
    facets: Facets
    searches: Annotated[list[SearchTrace], operator.add]
    candidate_lists: Annotated[list[list[str]], operator.add]
    pending: list[tuple[str, SearchKind]]
    pool: dict[str, PoolItem]
    top_score: float | None
    persons: list[str]
    span: list[str]
    story: list[Any]
    seen_evidence: set[str]
    coverage: dict[str, float]
    # budgets and what happened
    calls: Annotated[int, operator.add]
    llm_calls: Annotated[int, operator.add]
    fetches: Annotated[int, operator.add]
    budget_hit: bool
    degraded_reasons: Annotated[list[str], operator.add]
    steps: Annotated[list[str], operator.add]
    timings_ms: Annotated[dict[str, float], _add_times]
    # answer
    selection: list[str]
    selection_scores: dict[str, float]
    member_texts: dict[str, str]
    evidence: list[answer_mod.EvidenceMessage]
    draft: tuple[str, list[answer_mod.Claim], list[str]] | None
    result: AgentAnswer | ArcAnswer | None


def _node(name: str, node: Callable[[AgentState, Run], dict]) -> Callable[[AgentState, RunnableConfig], dict]:
    """A graph node: ``node`` works on a Run built from the state; the Run's changes, the node's
    own control-flow update and its time go back into the state."""
    def wrapped(state: AgentState, config: RunnableConfig) -> dict:
        start = time.perf_counter()
        run = Run.from_state(state, config)
        flow = node(state, run)
        return run.update() | flow | {"timings_ms": {name: (time.perf_counter() - start) * 1000}}

    return wrapped


# --- nodes --------------------------------------------------------------------------------------


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
        variants = [(q, "sub_query") for q in subs] or [(q, "variant") for q in facet_variants(run.question, run.facets, limit)]
        # Offline the variants are known before the first search: encode them together with it.
        results = run.search_all([(run.question, "question")] + ([] if run.llm_active else variants))
        if results and run.llm_active:
            leaf = [(h.local_id, h.speaker, h.text) for h in results[0].hits[:LEAF_CONTEXT]]
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
    todo = [p for p in sorted(run.pool.values(), key=lambda p: -p.offline) if not p.llm_graded][: run.profile.first_search]
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
    must = sum(1 for p in chosen if run.matcher.must_have(p.match) and p.grade >= MUST_HAVE_MIN_GRADE)
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
    run.step(f"coverage: top5={top5:.3f} (min {profile.min_top5_relevance}), must_have={must} "
             f"(min {profile.min_must_have_hits}) -> {reason or 'corrective'}")
    return {"stop_reason": reason}


def corrective(state: AgentState, run: Run) -> dict:
    top = run.ranked()[:3]
    covered = set().union(*(p.match.artifact_terms for p in top)) if top else set()
    uncovered = [a for a in run.facets.artifact if stem(a) not in covered]
    limit = run.profile.rewrite_candidates
    leaf = [(p.hit.local_id, p.hit.speaker, p.hit.text) for p in run.ranked()[:LEAF_CONTEXT]]
    rewrites = run.ask_llm("rewrite", lambda: llm_variants(run.llm, run.question, leaf, limit))
    if rewrites is not None:
        run.pending = [(q, "rewrite") for q in rewrites if q not in run.queries]
    else:
        run.pending = [(q, "corrective") for q in corrective_variants(
            run.question, run.facets, uncovered, [p.hit.text for p in top], run.queries, limit)]
    run.step(f"corrective: uncovered facets {uncovered}; re-search {[q for q, _ in run.pending]}")
    return {}


def generator(state: AgentState, run: Run) -> dict:
    if run.task == "arc":
        _build_arc(state, run)
        return {}
    # The answer reads the evidence in order: best grade first.
    chosen = sorted(run.select(run.profile.max_evidence_fetches), key=lambda p: -p.grade)
    run.selection = [p.hit.local_id for p in chosen]
    for search in run.searches:
        search.selected = [i for i in search.found if i in run.selection]
    ranking = run.ranking_scores()
    run.selection_scores = {p.hit.local_id: ranking[p.hit.local_id] for p in chosen}
    stored = {}
    if run.selection and run.can_call(final=True):
        run.calls += 1
        run.fetches += len(run.selection)
        stored = {h.local_id: h for h in run.retriever.messages(run.chat_file, run.selection)}
    run.evidence = [
        answer_mod.EvidenceMessage(
            local_id=p.hit.local_id, position=p.hit.position, speaker=p.hit.speaker,
            text=(stored.get(p.hit.local_id) or p.hit).text, timestamp=p.hit.timestamp,
            grade=p.grade, match=p.match,
        )
        for p in chosen
    ]
    drafted = None
    if run.evidence:
        drafted = run.ask_llm("generator", lambda: answer_mod.llm_claims(run.llm, run.question, run.evidence), final=True)
    if drafted is None:
        drafted = _offline_answer(run, run.evidence)
        if not drafted[1] and (replies := _replies(run)):
            run.evidence += replies
            drafted = _offline_answer(run, replies)
            run.step(f"generator: replies {[e.local_id for e in replies]} to the questions in the evidence")
    run.draft = drafted
    run.step(f"generator: {len(run.evidence)} evidence messages, {len(drafted[1])} claims")
    return {}


def _offline_answer(run: Run, evidence: list[answer_mod.EvidenceMessage]) -> tuple[str, list[answer_mod.Claim], list[str]]:
    chat = run.retriever.chat(run.chat_file)
    return answer_mod.offline_answer(run.question, run.facets.intent, evidence, entities=getattr(chat, "entities", ()),
                                     speakers=getattr(chat, "speaker_names", ()))


def _replies(run: Run, look_at: int = 3) -> list[answer_mod.EvidenceMessage]:
    """The next message (other speaker, same session) after each of the best evidence messages
    that asks a question: "where do you run?" is answered by the reply, which shares few words
    with the user's question. Within the evidence budget; one lookup call."""
    chat = run.retriever.chat(run.chat_file)
    have = {e.local_id for e in run.evidence}
    wanted: dict[str, answer_mod.EvidenceMessage] = {}
    for e in run.evidence[:look_at]:
        row = chat.row_of.get(e.local_id)
        if "?" not in e.text or row is None or row + 1 >= chat.size:
            continue
        nxt = row + 1
        if chat.sessions[nxt] == chat.sessions[row] and chat.speakers[nxt] != chat.speakers[row]:
            wanted.setdefault(chat.local_ids[nxt], e)
    room = run.profile.max_evidence_fetches - len(run.evidence)
    ids = [i for i in wanted if i not in have][:max(0, room)]
    if not ids or not run.can_call(final=True):
        return []
    run.calls += 1
    run.fetches += len(ids)
    replies = []
    for hit in run.retriever.messages(run.chat_file, ids):
        if looks_like_injection(hit.text):
            continue
        asked = wanted[hit.local_id]
        replies.append(answer_mod.EvidenceMessage(
            local_id=hit.local_id, position=hit.position, speaker=hit.speaker, text=hit.text, timestamp=hit.timestamp,
            grade=asked.grade, match=run.matcher.match(hit.speaker, hit.text), reply_to=asked.local_id))
    return replies


def _relevance(run: Run, claims: list[answer_mod.Claim]) -> dict[str, float]:
    """Similarity of the question with each evidence message a claim cites (the embedder's)."""
    by_id = {e.local_id: e for e in run.evidence}
    cited = sorted({i for c in claims for i in c.ids if i in by_id})
    if not cited:
        return {}
    vectors = run.retriever.embedder.encode([run.question] + [f"{by_id[i].speaker}: {by_id[i].text}" for i in cited])
    return {i: float(v @ vectors[0]) for i, v in zip(cited, vectors[1:])}


def verification(state: AgentState, run: Run) -> dict:
    if run.task == "arc":
        return {}
    text, claims, llm_unknowns = run.draft
    evidence = {e.local_id: e for e in run.evidence}
    verified, notes, verifier = answer_mod.check_claims(
        claims, evidence, run.facets.intent, _relevance(run, claims), run.facets.artifact,
        llm_check=lambda kept: run.ask_llm("verifier", lambda: answer_mod.llm_verify(run.llm, run.question, kept, evidence),
                                           final=True))
    problems = [note for note in notes if note]
    if verified and len(verified) == len(claims):
        final_text = text
    elif verified:
        final_text = " ".join(c.text for c in verified)
    else:
        final_text = answer_mod.NO_ANSWER
    unknowns = problems + llm_unknowns + _coverage_unknowns(run, state)
    # Best first; a story reads in time order.
    ordered = sorted(run.evidence, key=lambda e: e.position) if run.route == "global" else run.evidence
    items = [EvidenceItem(id=e.local_id, text=f"{e.speaker}: {e.text}", point=_point(e, run)) for e in ordered]
    run.step(f"verification ({verifier}): {len(verified)}/{len(claims)} claims verified")
    run.result = AgentAnswer(
        Answer=final_text, Evidence=items, Unknowns=unknowns, **run_info(run, state),
        claims=[ClaimCheck(text=c.text, ids=c.ids, supported=note is None, note=note) for c, note in zip(claims, notes)],
        verifier=verifier, abstained=not verified,
    )
    return {}


def _point(e: answer_mod.EvidenceMessage, run: Run) -> str:
    parts = [f"reply to {e.reply_to}"] if e.reply_to else []
    if e.match.artifact_terms:
        parts.append(f"mentions {', '.join(e.match.matched)}")
    if e.match.target:
        parts.append(f"involves {', '.join(run.facets.target or run.persons)}")
    parts.append(f"grade {e.grade:.2f}")
    return "; ".join(parts)


def _coverage_unknowns(run: Run, state: AgentState) -> list[str]:
    out = []
    if state.get("stop_reason") != "coverage_met" and run.pool:
        top5, must = run.coverage.get("top5_relevance", 0.0), run.coverage.get("must_have_hits", 0)
        short = ([f"top-5 relevance {top5:.2f} < {run.profile.min_top5_relevance}"]
                 if top5 < run.profile.min_top5_relevance else [])
        short += [f"must-have hits {must} < {run.profile.min_must_have_hits}"] if must < run.profile.min_must_have_hits else []
        out.append(f"Evidence may be incomplete ({state.get('stop_reason')}): {', '.join(short)}")
    covered = set().union(*(e.match.artifact_terms for e in run.evidence)) if run.evidence else set()
    missing = [a for a in run.facets.artifact if stem(a) not in covered]
    if missing and run.evidence:
        out.append(f"No selected evidence mentions: {', '.join(missing)}")
    return out


def _flagged_ids(run: Run) -> list[str]:
    """Messages the run saw (its pool, its story's blocks) that address an AI, in file order:
    kept as data, never evidence."""
    seen = {p.hit.local_id: p.hit for p in run.pool.values()} | {h.local_id: h for b in run.story for h in b.members}
    return sorted((i for i, h in seen.items() if looks_like_injection(h.text)), key=lambda i: seen[i].position)


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
            candidates=[RankedId(id=str(i), score=s) for i, s in rrf(run.candidate_lists)] if run.candidate_lists else [],
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


# --- arc mode -----------------------------------------------------------------------------------


def _build_arc(state: AgentState, run: Run) -> None:
    phases, unknowns = arc_phases(run)
    run.result = ArcAnswer(phases=phases, Unknowns=unknowns, **run_info(run, state))


def arc_phases(run: Run) -> tuple[list[Phase], list[str]]:
    """Segment the story's blocks (or, with no block layer, the best message hits) into phases."""
    blocks: list[narrative.Block] = []
    scores: dict[str, float] = {}
    for block in run.story:
        # As in ask(): a message that addresses an AI is never evidence.
        members = [narrative.Member(h.local_id, h.position, h.speaker, h.text, h.timestamp)
                   for h in block.members if not looks_like_injection(h.text)]
        scores.update((h.local_id, h.score) for h in block.members)
        if members:
            blocks.append(narrative.Block(block.block_id, members))
    if not run.story and run.pool:
        # No block layer: each hit of the selection is its own one-message block.
        for item in run.select(run.profile.arc_blocks):
            h = item.hit
            blocks.append(narrative.Block(h.local_id, [narrative.Member(h.local_id, h.position, h.speaker, h.text, h.timestamp)]))
            scores[h.local_id] = item.grade
    run.member_texts = {m.local_id: f"{m.speaker}: {m.text}" for b in blocks for m in b.members}
    phases: list[Phase] = []
    if blocks:
        phases = run.ask_llm("segmenter", lambda: narrative.segment_llm(run.llm, run.question, blocks, scores), final=True) or []
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


# --- graph --------------------------------------------------------------------------------------


def _after_coverage(state: AgentState) -> str:
    return "generator" if state.get("stop_reason") else "corrective"


def build_graph(checkpointer: Any = None):
    """The compiled graph; with a LangGraph ``checkpointer`` every step's state is kept (pass a
    ``thread_id`` in the config)."""
    graph = StateGraph(AgentState)
    for name, node in (
        ("planner", planner), ("retriever", retriever), ("grader", grader), ("coverage", coverage),
        ("corrective", corrective), ("generator", generator), ("verification", verification),
    ):
        graph.add_node(name, _node(name, node))
    graph.add_edge(START, "planner")
    graph.add_edge("planner", "retriever")
    graph.add_edge("retriever", "grader")
    graph.add_edge("grader", "coverage")
    graph.add_conditional_edges("coverage", _after_coverage, {"corrective": "corrective", "generator": "generator"})
    graph.add_edge("corrective", "retriever")
    graph.add_edge("generator", "verification")
    graph.add_edge("verification", END)
    return graph.compile(checkpointer=checkpointer)


_GRAPH = None


def run_agent(
    retriever: Any, chat_file: str, question: str, profile: Profile, llm: LLMClient | None = None, task: Task = "ask",
    on_step: Callable[[str, list[str]], None] | None = None,
) -> AgentAnswer | ArcAnswer:
    """Run the graph for one question; ``task="arc"`` answers with phases. ``on_step(node,
    lines)`` is called as each node finishes, with the trace lines it wrote."""
    global _GRAPH
    if _GRAPH is None:
        _GRAPH = build_graph()
    start = time.perf_counter()
    result = None
    # Each round is 5 graph steps; the rounds are bounded by the profile, not by LangGraph.
    config = {"configurable": {"retriever": retriever, "profile": profile, "llm": llm},
              "recursion_limit": 10 + 5 * profile.max_rounds}
    for update in _GRAPH.stream({"chat_file": chat_file, "question": question, "task": task}, config,
                                stream_mode="updates"):
        for node, changes in update.items():
            result = changes.get("result") or result
            if on_step:
                on_step(node, changes.get("steps", []))
    result.timings_ms["total"] = round((time.perf_counter() - start) * 1000, 3)
    return result
