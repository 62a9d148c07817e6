"""What retrieval hands out: the chat message as retrieved (``ChatMessage``, the one record the
agent's answers and stories use too), a scored message (``Hit``), a block with all its messages
(``BlockHit``) and a search's result with its trace."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from narrative_mirror.reactions import Reaction


@dataclass
class ChatMessage:
    """One message of a chat as the index stores it."""

    local_id: str  # the chat's own id, e.g. "D3:14"
    message_id: str  # "<chat_file>/<local_id>"
    position: int  # file order
    session: int
    speaker: str
    text: str  # as written (without the speaker)
    timestamp: datetime | None
    block_id: str | None = None  # its L1 topic block
    edited: bool = False  # its author edited it: ``text`` is the edited text
    reactions: tuple[Reaction, ...] = ()  # who reacted, with which emoji (exports that carry them)


@dataclass(kw_only=True)
class Hit(ChatMessage):
    """A message found by a search, with its score and why."""

    score: float
    reasons: dict[str, float] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)  # which lists / stages brought it in


@dataclass
class BlockHit:
    """An L1 block found by ``Retriever.search_blocks``, with ALL its messages."""

    block_id: str
    score: float  # RRF of the block lists
    thread_id: str | None  # its L2 thread
    members: list[Hit]  # ALL its messages, file order; score: from its rank in the search (1 = the best)
    sources: list[str]  # the block lists that ranked it among their first k


@dataclass
class RankTrace:
    """One retrieval's ranking checkpoints (the agent's record of its searches is ``agent.contract.SearchTrace``)."""

    candidates: list[tuple[str, float]]  # checkpoint 1: the whole first-stage pool, ranked
    reranked: list[tuple[str, float]]  # checkpoint 2: the pool after expansion / reranking


@dataclass
class SearchResult:
    hits: list[Hit]
    trace: RankTrace
    query_info: dict
    timings_ms: dict[str, float]
