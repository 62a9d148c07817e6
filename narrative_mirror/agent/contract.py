"""Output contract of the agent (seed 002): Answer, Evidence, Unknowns, plus how it was reached.

An answer's JSON is ``answer_json``: the snake_case field names (``answer``, ``evidence``,
``unknowns``, ``route``...), the one shape of ``POST /api/ask`` and of ``ask --json``. The
capitalized aliases (``Answer``, ``Evidence``, ``Unknowns``) are accepted when building an answer,
never written.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from narrative_mirror.chat_time import Clocks, stamp_messages

Route = Literal["direct", "multi_hop", "global", "oneshot"]
StopReason = Literal[
    "coverage_met", "story_found", "max_rounds", "no_new_evidence", "budget_calls", "no_hits", "oneshot"
]


class ReactionItem(BaseModel):
    emoji: str
    people: list[str]  # who reacted, as far as the export names them
    count: int  # how many reacted


class EvidenceItem(BaseModel):
    id: str  # the chat's local id, e.g. "D3:14"
    text: str  # "speaker: text" as stored
    point: str  # what this message supports, in the agent's words
    speaker: str | None = None  # who wrote it
    timestamp: datetime | None = None  # when (None: the chat gives no time)
    chat: str | None = None  # the chat it is from (answer_json writes the answer's chat when unset)
    edited: bool = False  # its author edited it: ``text`` is the edited text, what counts as said
    reactions: list[ReactionItem] = []  # the emoji people answered it with (exports that carry them)


class ClaimCheck(BaseModel):
    text: str
    ids: list[str]  # the evidence ids it cites
    supported: bool  # passed verification (it is in the answer); else it is in Unknowns
    note: str | None = None  # why it was not supported
    # Supported, and its own cited messages (with what they answer) state what the question asks:
    # they mention every topic term of it (agent/answer.states_what_is_asked). The inspector's badge.
    verified: bool = False


class RankedId(BaseModel):
    id: str
    score: float


SearchKind = Literal["question", "sub_query", "variant", "rewrite", "corrective", "blocks"]


class SearchTrace(BaseModel):
    query: str
    kind: SearchKind  # the question itself, a multi_hop sub-question, a facet variant, an LLM rewrite, a re-search,
    # the block search (arc mode; ``found`` holds block ids)
    found: list[str] = []  # its best ids, best first
    selected: list[str] = []  # which of its hits became evidence


class DebugTrace(BaseModel):
    """The three checkpoints evaluation uses to tell where a gold id was lost."""

    candidates: list[RankedId] = []  # 1: every candidate of every search, fused (RRF score)
    reranked: list[RankedId] = []  # 2: the pool in ranked order (the question's search first)
    final: list[RankedId] = []  # 3: the selected evidence
    queries: list[str] = []  # every search query, in order
    searches: list[SearchTrace] = []  # the same searches: what kind each is and what it found
    steps: list[str] = []  # one line per node run: what it decided and why


class Facets(BaseModel):
    intent: str  # question type: when / where / who / what / why / how / how_many / yes_no / story
    target: list[str] = []  # people or things the question is about
    artifact: list[str] = []  # content terms of what is asked about
    time: str | None = None  # time expression of the question, as written


class Phase(BaseModel):
    name: str
    summary: str
    evidence: list[str]  # local ids, file order
    over_cap_reason: str | None = None  # why the phase holds more than the soft cap's max_ids (seed 000)


class RunInfo(BaseModel):
    """How a run went: shared by both answers."""

    model_config = ConfigDict(populate_by_name=True)

    question: str
    chat_file: str
    mode: Literal["agent", "oneshot"] = "agent"
    route: Route
    profile: str
    facets: Facets
    rounds: int  # retrieval rounds run
    calls: int  # tool calls: searches + fetches + LLM calls
    llm_calls: int
    fetches: int  # stored units pulled by id
    stop_reason: StopReason
    coverage: dict[str, float] = {}  # top5_relevance and must_have_hits at the last coverage check
    degraded: bool = False  # the LLM failed and the offline path answered
    degraded_reason: str | None = None
    flagged_ids: list[str] = []  # messages that look like instructions to an AI (never obeyed)
    trace: DebugTrace
    timings_ms: dict[str, float] = {}


class AgentAnswer(RunInfo):
    answer: str = Field(alias="Answer")
    evidence: list[EvidenceItem] = Field(alias="Evidence")
    unknowns: list[str] = Field(alias="Unknowns")
    phases: list[Phase] = []  # story questions: the answer's phases in time order
    claims: list[ClaimCheck] = []  # every drafted claim and whether verification kept it
    verifier: str = ""  # which checks ran (offline proxy, or LLM chain-of-verification on top)
    abstained: bool = False  # no claim survived: the answer says the chat does not tell

    @property
    def selected_ids(self) -> list[str]:
        return [item.id for item in self.evidence]

    @property
    def ranked_ids(self) -> list[str]:
        """The pool in ranked order (checkpoint 2): the list ranking metrics read."""
        return [item.id for item in self.trace.reranked]


class ArcAnswer(RunInfo):
    phases: list[Phase]
    unknowns: list[str] = Field(alias="Unknowns")

    @property
    def selected_ids(self) -> list[str]:
        return [lid for phase in self.phases for lid in phase.evidence]


def answer_json(answer: AgentAnswer | ArcAnswer, clocks: Clocks | None = None, **extra: Any) -> dict:
    """The JSON object of an answer (snake_case names, ISO times), with ``extra`` keys added; every
    evidence entry names its chat. ``clocks`` (chat -> its ``chat_time.ChatClock``): the times of
    ``evidence`` and of an ``evidence_messages`` extra are written in their chat's zone with the
    offset, and ``time_zones`` names the zones used."""
    data = answer.model_dump(mode="json")
    for item in data.get("evidence") or ():
        item["chat"] = item.get("chat") or answer.chat_file
    if clocks is not None:
        zones = stamp_messages(
            [*data.get("evidence", []), *extra.get("evidence_messages", [])], clocks, answer.chat_file
        )
        data["time_zones"] = zones
    return {**data, **extra}
