"""Questions over several chats at once: which chats a selector names (keys, globs, all) within
the chats a caller may read, one ranked list merged from each chat's own search, and an answer
from the evidence of the chats that list ranks best.

Each chat is searched by ``Retriever.search`` as it is alone (unchanged), at most ``k`` hits each,
in a bounded thread pool. Per-chat scores are not comparable across chats (the default variant's
scores are relative to its own pool's best), so the merge ranks by ``MERGE_BY``:
- ``rrf``: 1 / (rrf_k + rank within its chat): the chats interleaved.
- ``cosine``: the query's cosine with the message vector (one embedder for every chat).
- ``gated`` (default): the hit's score within its chat times its chat's weight,
  exp((chat best cosine - best cosine of all chats) / gate_temperature + name_weight x the
  chat's speakers and named entities the query names), both from retrieval.toml's [across_chats]:
  the chat that holds the closest messages and the people asked about keeps its own order, the
  others fall behind.
benchmarks/across_chats.py measures each (and the gate's two settings) on the RealTalk train chats.
"""

from __future__ import annotations

import fnmatch
import math
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from narrative_mirror.agent.contract import AgentAnswer, DebugTrace, RankedId
from narrative_mirror.retrieval.config import option
from narrative_mirror.retrieval.records import Hit

MERGE_BY = ("gated", "rrf", "cosine")
DEFAULT_MERGE = "gated"
SEARCH_WORKERS = 4  # chats searched at once by one request
ASK_CHATS = 3  # at most this many chats (the merged list's best) are asked with the agent
PATTERN_CHARS = "*?["
ALL = "*"


class NoChatMatches(ValueError):
    """A chat pattern that matches none of the chats the caller may read (its message names it)."""

    def __init__(self, pattern: str):
        super().__init__(f"no chat matches {pattern!r}")
        self.pattern = pattern


def selector_parts(selector: str | Iterable[str]) -> list[str]:
    """The keys and globs of ``selector``: a comma-separated string or a list of them, in order."""
    items = [selector] if isinstance(selector, str) else list(selector)
    parts = [p.strip() for item in items for p in str(item).split(",")]
    parts = [p for p in parts if p]
    if not parts:
        raise ValueError("no chat named: give a chat key, a comma-separated list, a glob or all")
    return list(dict.fromkeys(parts))


def is_pattern(part: str) -> bool:
    return any(ch in part for ch in PATTERN_CHARS)


def is_several(selector: str | Iterable[str]) -> bool:
    """True when ``selector`` may name more than one chat (a list or a glob)."""
    parts = selector_parts(selector)
    return len(parts) > 1 or is_pattern(parts[0])


def select_chats(
    selector: str | Iterable[str], available: Iterable[str], readable: Callable[[str], bool] = lambda chat: True
) -> list[str]:
    """The chats ``selector`` names, in selector order (each glob's matches sorted). A glob expands
    only within ``available`` chats that are ``readable`` (a token's scope): one matching none raises
    ``NoChatMatches``, the same whether chats outside the scope would match. A plain key is kept as
    given (the caller checks it as a single chat is checked)."""
    pool = sorted(chat for chat in available if readable(chat))
    chosen: list[str] = []
    for part in selector_parts(selector):
        if not is_pattern(part):
            chosen.append(part)
            continue
        matches = [chat for chat in pool if fnmatch.fnmatchcase(chat, part)]
        if not matches:
            raise NoChatMatches(part)
        chosen.extend(matches)
    return list(dict.fromkeys(chosen))


@dataclass
class ChatHit:
    """A hit of a merged search: its chat, its rank there (0 = best) and its merged score."""

    chat: str
    hit: Hit
    rank: int
    score: float

    @property
    def message_id(self) -> str:
        return f"{self.chat}/{self.hit.local_id}"


@dataclass
class MergedSearch:
    hits: list[ChatHit]  # best first, at most k
    chats: list[str]  # the chats searched, in the order given
    results: dict[str, Any]  # chat -> what its own search returned
    timings_ms: dict[str, float] = field(default_factory=dict)

    def chats_by_rank(self) -> list[str]:
        """The chats with a hit, in the order of their best hit."""
        return list(dict.fromkeys(h.chat for h in self.hits))


def _chat_cosines(retriever: Any, chat: str, hits: Sequence[Hit], qvec: np.ndarray) -> np.ndarray:
    index = retriever.chat(chat)
    rows = [index.row_of[h.local_id] for h in hits]
    vectors = index.vectors[rows]
    norms = np.linalg.norm(vectors, axis=1) * (np.linalg.norm(qvec) or 1.0)
    return (vectors @ qvec) / np.where(norms > 0, norms, 1.0)


def merge(
    retriever: Any,
    query: str,
    per_chat: dict[str, Sequence[Hit]],
    k: int,
    by: str = DEFAULT_MERGE,
    qvec: np.ndarray | None = None,
    named: dict[str, int] | None = None,
    temperature: float | None = None,
    name_weight: float | None = None,
) -> list[ChatHit]:
    """The ``k`` best hits of ``per_chat`` (each chat's hits best first) by the ``by`` score;
    ``qvec``: the query's vector when the caller has it; ``named``: per chat, how many of its
    speakers and named entities the query names (``gated`` adds ``name_weight`` per name to the
    chat's log weight). ``temperature`` and ``name_weight``: retrieval.toml's [across_chats] when
    not given."""
    temperature = option(retriever.config, "across_chats.gate_temperature") if temperature is None else temperature
    name_weight = option(retriever.config, "across_chats.name_weight") if name_weight is None else name_weight
    named = named or {}
    if by not in MERGE_BY:
        raise ValueError(f"merge by {by!r}: expected one of {list(MERGE_BY)}")
    cosines: dict[str, np.ndarray] = {}
    if by != "rrf":
        if qvec is None:
            qvec = retriever.embedder.encode([query])[0]
        qvec = np.asarray(qvec, dtype=np.float32)
        cosines = {chat: _chat_cosines(retriever, chat, hits, qvec) for chat, hits in per_chat.items() if hits}
    best = max((float(c.max()) for c in cosines.values()), default=0.0)
    merged: list[ChatHit] = []
    for chat, hits in per_chat.items():
        if by == "gated" and hits:
            weight = math.exp((float(cosines[chat].max()) - best) / temperature + name_weight * named.get(chat, 0))
        for rank, hit in enumerate(hits):
            if by == "rrf":
                score = 1.0 / (retriever.rrf_k + rank + 1)
            elif by == "cosine":
                score = float(cosines[chat][rank])
            else:
                score = float(hit.score) * weight
            merged.append(ChatHit(chat, hit, rank, score))
    # ties: the better rank within its chat, then the chats' given order (stable sort)
    merged.sort(key=lambda h: (-h.score, h.rank))
    return merged[:k]


_POOL = ThreadPoolExecutor(SEARCH_WORKERS, thread_name_prefix="nm-chats")


def search_chats(
    retriever: Any,
    chats: Sequence[str],
    query: str,
    k: int = 10,
    *,
    by: str = DEFAULT_MERGE,
    search: Callable[[str], Any] | None = None,
    hits_of: Callable[[Any], Sequence[Hit]] = lambda result: result.hits,
    info_of: Callable[[Any], dict] = lambda result: result.query_info,
) -> MergedSearch:
    """Each of ``chats`` searched for ``query`` (``search(chat)``, default ``retriever.search`` with
    ``k``) in the shared pool of ``SEARCH_WORKERS`` threads, merged into the ``k`` best by ``by``."""
    if not chats:
        raise ValueError("no chat to search")
    started = time.perf_counter()
    search = search or (lambda chat: retriever.search(chat, query, k))
    results = dict(zip(chats, _POOL.map(search, chats))) if len(chats) > 1 else {chats[0]: search(chats[0])}
    searched = time.perf_counter()
    named = {
        chat: len(info_of(r).get("persons") or ()) + len(info_of(r).get("entities") or ())
        for chat, r in results.items()
    }
    hits = merge(retriever, query, {chat: list(hits_of(r))[:k] for chat, r in results.items()}, k, by, named=named)
    return MergedSearch(
        hits,
        list(chats),
        results,
        {
            "search": (searched - started) * 1000,
            "merge": (time.perf_counter() - searched) * 1000,
            "total": (time.perf_counter() - started) * 1000,
        },
    )


def _tagged(answer: AgentAnswer, chat: str) -> AgentAnswer:
    """``answer`` with every evidence item naming ``chat``."""
    return answer.model_copy(update={"evidence": [e.model_copy(update={"chat": chat}) for e in answer.evidence]})


def _prefixed(ranked: Sequence[RankedId], chat: str) -> list[RankedId]:
    return [RankedId(id=f"{chat}/{r.id}", score=r.score) for r in ranked]


def combine(question: str, answers: Sequence[tuple[str, AgentAnswer]], searched: Sequence[str]) -> AgentAnswer:
    """One answer from the answers of several chats (best chat first): the answers that found
    something, each after its chat's key; every evidence item names its chat; the trace's ids and
    the claims' ids are message ids (``chat/local id``), since local ids repeat across chats."""
    told = [(chat, a) for chat, a in answers if not a.abstained] or list(answers[:1])
    text = told[0][1].answer if len(told) == 1 else "\n".join(f"{chat}: {a.answer}" for chat, a in told)
    first = told[0][1]
    trace = DebugTrace(
        candidates=[r for chat, a in answers for r in _prefixed(a.trace.candidates, chat)],
        reranked=[r for chat, a in answers for r in _prefixed(a.trace.reranked, chat)],
        final=[r for chat, a in answers for r in _prefixed(a.trace.final, chat)],
        queries=[q for _, a in answers for q in a.trace.queries],
        searches=[s for _, a in answers for s in a.trace.searches],
        steps=[
            f"across chats: searched {len(searched)}, asked {', '.join(c for c, _ in answers)}",
            *(f"{chat}: {line}" for chat, a in answers for line in a.trace.steps),
        ],
    )
    claims = [c.model_copy(update={"ids": [f"{chat}/{i}" for i in c.ids]}) for chat, a in answers for c in a.claims]
    degraded = [a.degraded_reason for _, a in answers if a.degraded]
    return first.model_copy(
        update={
            "question": question,
            "chat_file": ",".join(chat for chat, _ in answers),
            "answer": text,
            "evidence": [e for chat, a in told for e in _tagged(a, chat).evidence],
            "unknowns": list(dict.fromkeys(u for _, a in answers for u in a.unknowns)),
            "claims": claims,
            "trace": trace,
            "abstained": all(a.abstained for _, a in answers),
            "rounds": sum(a.rounds for _, a in answers),
            "calls": sum(a.calls for _, a in answers),
            "llm_calls": sum(a.llm_calls for _, a in answers),
            "fetches": sum(a.fetches for _, a in answers),
            "degraded": bool(degraded),
            "degraded_reason": "; ".join(r for r in degraded if r) or None,
            "flagged_ids": [f"{chat}/{i}" for chat, a in answers for i in a.flagged_ids],
            "timings_ms": {"total": sum(a.timings_ms.get("total", 0.0) for _, a in answers)},
        }
    )


def ask_chats(
    retriever: Any,
    chats: Sequence[str],
    question: str,
    ask_one: Callable[[str], AgentAnswer],
    *,
    most: int = ASK_CHATS,
    by: str = DEFAULT_MERGE,
) -> tuple[AgentAnswer, MergedSearch | None]:
    """The answer over ``chats``: one chat is asked as alone (its evidence naming it); several are
    searched and merged first, and the ``most`` chats the merged list ranks best are asked
    (``ask_one(chat)``), their answers combined (``combine``). Returns the merged search too (None
    for one chat)."""
    if len(chats) == 1:
        return _tagged(ask_one(chats[0]), chats[0]), None
    merged = search_chats(retriever, chats, question, by=by)
    asked = merged.chats_by_rank()[:most] or list(chats[:1])
    return combine(question, [(chat, ask_one(chat)) for chat in asked], chats), merged


def _messages(retriever: Any, message_ids: Sequence[str]) -> dict[str, Any]:
    """message id (``chat/local id``) -> its ``Hit``, read per chat."""
    by_chat: dict[str, list[str]] = {}
    for message_id in message_ids:
        chat, _, local_id = message_id.partition("/")
        by_chat.setdefault(chat, []).append(local_id)
    return {f"{chat}/{h.local_id}": h for chat, ids in by_chat.items() for h in retriever.messages(chat, ids)}


def _message_texts(retriever: Any, message_ids: Sequence[str]) -> dict[str, str]:
    """message id (``chat/local id``) -> text, read per chat."""
    return {i: h.text for i, h in _messages(retriever, message_ids).items()}


def searched_label(chats: Sequence[str]) -> str:
    """The chats searched as an event's ``chat_file``: their keys joined by commas (keys hold
    none), cut to the event's 200 characters with how many more there were."""
    label = ",".join(chats)
    if len(label) <= 200:
        return label
    kept: list[str] = []
    for chat in chats:
        if len(",".join([*kept, chat])) + len(f",+{len(chats)} more") > 200:
            break
        kept.append(chat)
    return ",".join([*kept, f"+{len(chats) - len(kept)} more"])


def ask_chats_logged(
    retriever: Any,
    chats: Sequence[str],
    question: str,
    profile: str,
    llm: Any,
    mode: str,
    event_log: Any,
    user_id: str = "anonymous",
    session_id: str | None = None,
    ask_one: Callable[[str], AgentAnswer] | None = None,
) -> tuple[AgentAnswer, str]:
    """``ask_chats`` with one retrieval event, as ``logged_query.ask_logged`` logs one chat's ask:
    ``chat_file`` the chats searched (``searched_label``), ids as message ids, and
    ``counts_per_source`` the merged list's hits per searched chat (``chat:<key>``, 0 for none)."""
    from narrative_mirror.citation_confidence import CitedMessage, answer_citations
    from narrative_mirror.events.record import RetrievalEvent, approx_tokens
    from narrative_mirror.logged_query import query_vector, search_settings
    from narrative_mirror.query import ask

    started = time.perf_counter()
    settings = search_settings(retriever, profile)
    ask_one = ask_one or (lambda chat: ask(retriever, chat, question, profile, llm, mode))
    answer, merged = ask_chats(retriever, chats, question, ask_one)
    returned = [r.id for r in answer.trace.reranked]
    texts = _message_texts(retriever, returned)
    cited, per_id, confidence = answer_citations(
        answer,
        {i: texts[i] for i in returned},
        lambda ids: {i: CitedMessage(h.text, h.timestamp, h.speaker) for i, h in _messages(retriever, ids).items()},
        getattr(retriever, "embedder", None),
    )
    found = [h.chat for h in merged.hits] if merged is not None else []
    event_id = event_log.log(
        RetrievalEvent(
            user_id=user_id,
            session_id=session_id,
            chat_file=searched_label(chats),
            query=question,
            returned_ids=returned,
            counts_per_source={f"chat:{chat}": found.count(chat) for chat in chats},
            cited_ids=cited,
            citation_confidence=confidence,
            cited_confidences=per_id,
            query_vector=query_vector(retriever, question),
            latency_ms=(time.perf_counter() - started) * 1000,
            tokens_in_context=approx_tokens(list(texts.values())),
            **settings,
        )
    )
    return answer, event_id
