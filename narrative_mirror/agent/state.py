"""A question's working memory in the agent graph: the graph state (``AgentState``, with the
reducers that merge node updates), one node's view of it with the budgets and the tool calls
(``Run``), and the candidate pool with its evidence selection.

Budgets: every search, fetch and LLM call costs one call; the calls the final steps need are
reserved up front, so a run never exceeds ``profile.max_calls``. The first LLM failure
(timeout, HTTP error, malformed answer) switches the rest of the run to the offline path and
marks the answer degraded.
"""

from __future__ import annotations

import copy
import dataclasses
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypedDict, TypeVar

from langchain_core.runnables import RunnableConfig

from narrative_mirror.agent import answer as answer_mod
from narrative_mirror.agent.addressed import addresses_the_reader
from narrative_mirror.agent.config import module_settings, setting
from narrative_mirror.agent.contract import AgentAnswer, ArcAnswer, Facets, Route, SearchKind, SearchTrace
from narrative_mirror.agent.grading import FacetMatch, FacetMatcher
from narrative_mirror.agent.profiles import Profile
from narrative_mirror.llm import LLMClient, LLMError
from narrative_mirror.retrieval.records import BlockHit, Hit, SearchResult

Task = Literal["ask", "arc"]
T = TypeVar("T")

# Ranking and selection follow the question's own search (the retriever's order); variant and
# corrective hits rank after the question's hits. An LLM grade (when configured) is a veto: an
# item it grades below SELECT_MIN_GRADE is not selected, and LLM-graded variant hits reaching
# SELECT_MIN_GRADE may be. COVER_MIN_GRADE: covering question terms the chosen evidence lacks.
# VARIANT_WEIGHT: variant hits weigh less than the question's own (relative score, arc mode
# excepted). SPAN_BLOCK_RELATIVE: on the global route (ask), a block found by the block search
# joins the answer's span when its RRF score is at least this share of the best block's.
# All from agent.toml's [selection], read when used.
__getattr__ = module_settings(
    __name__,
    {
        "SELECT_RELATIVE_SCORE": lambda: setting("selection", "relative_score"),
        "SELECT_MIN_GRADE": lambda: setting("selection", "min_grade"),
        "COVER_MIN_GRADE": lambda: setting("selection", "cover_min_grade"),
        "VARIANT_WEIGHT": lambda: setting("selection", "variant_weight"),
        "SPAN_BLOCK_RELATIVE": lambda: setting("selection", "span_block_relative"),
    },
)


@dataclass
class PoolItem:
    hit: Hit
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
REPLACED = (
    "chat_file",
    "question",
    "task",
    "route",
    "facets",
    "pool",
    "pending",
    "seen_evidence",
    "top_score",
    "persons",
    "span",
    "story",
    "coverage",
    "budget_hit",
    "result",
    "selection",
    "selection_scores",
    "member_texts",
    "evidence",
    "draft",
)


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
    span: list[str] = field(
        default_factory=list
    )  # global route: the best message of each block found, best block first
    story: list[BlockHit] = field(default_factory=list)  # arc mode: the blocks found, each whole, best first
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
        values = {
            name: copy.copy(value) if isinstance(value, (list, dict, set)) else value for name, value in values.items()
        }
        values["pool"] = {lid: dataclasses.replace(item) for lid, item in values.get("pool", {}).items()}
        run = cls(retriever=resources["retriever"], profile=resources["profile"], llm=resources["llm"], **values)
        if run.facets is not None:
            run.matcher = FacetMatcher(run.facets, run.persons)
        run._start = {name: len(getattr(run, name)) for name in APPENDED} | {
            name: getattr(run, name) for name in COUNTED
        }
        return run

    def update(self) -> dict[str, Any]:
        """What the node changed, as a state update: new items of APPENDED lists, increments of
        COUNTED numbers, the REPLACED values."""
        return (
            {name: getattr(self, name)[self._start.get(name, 0) :] for name in APPENDED}
            | {name: getattr(self, name) - self._start.get(name, 0) for name in COUNTED}
            | {name: getattr(self, name) for name in REPLACED}
        )

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

    def search_all(self, queries: list[tuple[str, SearchKind]]) -> list[SearchResult]:
        """Search the (query, kind) pairs the budget allows, their vectors encoded in one batch."""
        affordable = queries[: max(0, self.profile.max_calls - self.calls - self.reserve)]
        for query, _ in queries[len(affordable) :]:
            self.budget_hit = True
            self.step(f"retriever: budget: skipped search {query!r}")
        self.calls += len(affordable)
        variant = self.retriever.story_variant if self.task == "arc" else None
        results = self.retriever.search_many(
            self.chat_file, [q for q, _ in affordable], k=self.profile.first_search, variant=variant
        )
        for (query, kind), result in zip(affordable, results):
            self.searches.append(SearchTrace(query=query, kind=kind, found=[h.local_id for h in result.hits]))
        return results

    def search_blocks(self, k: int) -> list[BlockHit]:
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

    def add_result(self, result: SearchResult) -> int:
        """Merge one search result into the pool; returns how many ids are new."""
        self.candidate_lists.append([lid for lid, _ in result.trace.candidates])
        if self.top_score is None:
            self.top_score = max((h.score for h in result.hits), default=0.0)
            self.persons = list(result.query_info.get("persons") or [])
            self.matcher = FacetMatcher(self.facets, self.persons)
        # For a point question, hits of query variants count less than the question's own: a
        # variant stresses one reading of the question, its best hit is less sure. A story
        # wants the breadth the variants bring, so arc mode weighs them fully.
        weight = 1.0 if len(self.candidate_lists) == 1 or self.task == "arc" else setting("selection", "variant_weight")
        return self._merge(
            [
                (hit, weight * (hit.score / self.top_score if self.top_score and self.top_score > 0 else 1.0 / rank))
                for rank, hit in enumerate(result.hits, start=1)
            ]
        )

    def add_span(self, blocks: list[BlockHit]) -> int:
        """Global route: merge the best message of each block of a block search that scores at
        least SPAN_BLOCK_RELATIVE of the best block (scored as a variant's hits, on the block
        search's own relative scale); returns how many ids are new."""
        top = max((block.score for block in blocks), default=0.0)
        best = [
            max(block.members, key=lambda h: h.score)
            for block in blocks
            if block.members and block.score >= setting("selection", "span_block_relative") * top
        ]
        self.candidate_lists.append([h.local_id for h in best])
        self.span = [h.local_id for h in best]
        weight = setting("selection", "variant_weight")
        return self._merge([(h, weight * h.score) for h in best])

    def _merge(self, scored: list[tuple[Hit, float]]) -> int:
        """Put (hit, relative score) pairs into the pool; an id already there keeps its best score."""
        new = 0
        for hit, relative in scored:
            item = self.pool.get(hit.local_id)
            if item is None:
                match = self.matcher.match(hit.speaker, hit.text)
                self.pool[hit.local_id] = PoolItem(
                    hit=hit,
                    relative=relative,
                    match=match,
                    offline=0.0,
                    grade=0.0,
                    flagged=addresses_the_reader(hit.text),
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
        min_grade, relative_score = setting("selection", "min_grade"), setting("selection", "relative_score")
        chosen = [
            p
            for index, p in enumerate(ranked)
            if (p.grade >= min_grade if p.llm_graded else index < limit and p.relative >= relative_score)
        ][:limit] or ranked[:1]
        # A question term no chosen message contains: the best-graded pool item that has it.
        uncovered = set(self.matcher.artifact) - set().union(*(p.match.artifact_terms for p in chosen))
        extra = []
        for p in sorted(ranked, key=lambda p: -p.grade):
            if not uncovered or len(chosen) + len(extra) >= limit:
                break
            if (
                p not in chosen
                and p.grade >= setting("selection", "cover_min_grade")
                and p.match.artifact_terms & uncovered
            ):
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
    story: list[BlockHit]
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
