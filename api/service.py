"""The memory service behind the routes: who is asking (token), which chats they may read, and the
search, ask and health endpoints, each in its own thread pool (searches, offline asks, and the
LLM bulkhead for asks with an LLM).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import JSONResponse

from api.access import TokenEntry, TokenStore
from api.bulkhead import LLMPool, OneAnswer, ask_by, discard
from api.requests import ApiError, AskRequest, SearchQuery
from narrative_mirror.events.record import VARIANT_METHODS, RetrievalEvent, approx_tokens
from narrative_mirror.logged_query import ask_logged
from narrative_mirror.recall_runs import recorded_search

if TYPE_CHECKING:
    from narrative_mirror.agent.contract import AgentAnswer
    from narrative_mirror.events.writer import EventLog
    from narrative_mirror.llm import LLMClient
    from narrative_mirror.retrieval.engine import Retriever
    from narrative_mirror.retrieval.records import Hit

log = logging.getLogger(__name__)

ARRIVAL = "narrative_mirror.arrival"  # ASGI scope key: monotonic time the request arrived (set by the app)


def hit_json(hit: Hit) -> dict:
    """One search hit as the JSON the search endpoint returns."""
    return {
        "id": hit.local_id,
        "message_id": hit.message_id,
        "position": hit.position,
        "session": hit.session,
        "speaker": hit.speaker,
        "text": hit.text,
        "timestamp": hit.timestamp.isoformat(),
        "block_id": hit.block_id,
        "score": hit.score,
        "reasons": hit.reasons,
        "sources": hit.sources,
    }


def _degraded(answer: AgentAnswer, reason: str) -> AgentAnswer:
    return answer.model_copy(update={"degraded": True, "degraded_reason": reason})


class MemoryApi:
    """The endpoints over one retriever and event log: authentication, the chat checks, and the
    search, ask and health answers (``create_app`` routes requests here)."""

    def __init__(self, retriever: Retriever, event_log: EventLog, llm: LLMClient | None, runs_root: Path | None, *,
                 tokens: TokenStore | None, unavailable: Mapping[str, str], deadlines: Mapping[str, float],
                 llm_workers: int, llm_queue: int, search_workers: int, ask_workers: int, offline_reserve_s: float):
        self.retriever, self.event_log, self.llm, self.runs_root = retriever, event_log, llm, runs_root
        self.tokens, self.unavailable, self.deadlines = tokens, dict(unavailable), dict(deadlines)
        self.offline_reserve_s = offline_reserve_s
        self._chats: frozenset[str] = frozenset()
        self._health_seen: frozenset[str] = frozenset()  # chats health has seen indexed: one without rows now is lost
        self._health_event_failures = getattr(event_log, "failures", 0)  # event-store failures at the last check
        self.search_pool = ThreadPoolExecutor(search_workers, thread_name_prefix="nm-search")
        self.ask_pool = ThreadPoolExecutor(ask_workers, thread_name_prefix="nm-ask")
        self.llm_pool = LLMPool(llm_workers, llm_queue) if llm is not None else None

    def close(self) -> None:
        if self.llm_pool is not None:
            self.llm_pool.shutdown()
        self.search_pool.shutdown(wait=True, cancel_futures=True)
        self.ask_pool.shutdown(wait=True, cancel_futures=True)

    # -- access ---------------------------------------------------------------------------------------
    async def principal(self, request: Request) -> TokenEntry | None:
        """The token's entry (None when the API is open); 401 without a known token."""
        if self.tokens is None:
            return None
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        entry = self.tokens.authenticate(token.strip()) if scheme.lower() == "bearer" else None
        if entry is None:
            message = "an API token is required: Authorization: Bearer <token>" if not header else "unknown API token"
            raise ApiError(401, None, message, headers={"WWW-Authenticate": 'Bearer realm="narrative-mirror"'})
        return entry

    async def _chat(self, chat: str, who: TokenEntry | None, pool: ThreadPoolExecutor) -> str:
        """``chat`` if the token may read it (403 otherwise, whether it exists or not) and it is
        indexed (404; 503 when its build failed)."""
        if who is not None and not who.allows(chat):
            raise ApiError(403, "chat", "this API token may not read that chat")
        if chat in self.unavailable:
            raise ApiError(503, "chat", "that chat is unavailable: its build failed (see /api/health)")
        if chat not in self._chats:  # re-read the store: the chat may have been indexed since
            loop = asyncio.get_running_loop()
            self._chats = frozenset(await loop.run_in_executor(pool, self.retriever.chat_files))
            if chat not in self._chats:
                raise ApiError(404, "chat", "no indexed chat has that key")
        return chat

    # -- endpoints -------------------------------------------------------------------------------------
    async def health(self, who: TokenEntry | None) -> JSONResponse:
        """``ok``, or ``degraded`` with the reasons: chats whose build failed (``unavailable``),
        and ``problems``: an index that cannot be read or has no messages table, a chat served
        before that has no rows now, events that could not be stored since the last answer.
        The index is read anew each time (the store re-opens a failed connection), so health is
        ``ok`` again as soon as the store is repaired, without a restart."""
        def read_index() -> tuple[list[str], bool]:
            """(indexed chats, whether the messages table exists: asked only when none is indexed)."""
            chats = self.retriever.chat_files()
            store = getattr(self.retriever, "store", None)
            return chats, bool(chats) or store is None or "messages" in store.versions()

        loop = asyncio.get_running_loop()
        problems: list[str] = []
        chat_problems: dict[str, str] = {}
        # Chats this service has served: one of them without rows now is lost, not unknown.
        seen = self._health_seen | self._chats
        indexed: list[str] | None = None
        try:
            indexed, table_exists = await loop.run_in_executor(self.search_pool, read_index)
        except Exception as exc:  # any failure to read the store is what health reports
            log.warning("health: the index cannot be read: %s", exc)
            problems.append(f"index: cannot be read ({type(exc).__name__})")
        if indexed is not None:
            self._chats = frozenset(indexed)
            seen |= self._chats
            if not table_exists:
                problems.append("index: no messages table (the store is missing or was never built)")
        self._health_seen = seen
        if indexed is not None:
            for chat in sorted(seen - set(indexed) - set(self.unavailable)):
                chat_problems[chat] = "no rows in the index"
        failures = getattr(self.event_log, "failures", 0)
        new_failures = failures - self._health_event_failures
        self._health_event_failures = failures
        if new_failures > 0:
            problems.append(f"event log: {new_failures} event(s) could not be stored since the last health check")
        served = sorted(chat for chat in (indexed or ()) if chat not in self.unavailable)
        unavailable = dict(sorted(self.unavailable.items()))
        if who is not None:
            served = who.visible(served)
            unavailable = {chat: reason for chat, reason in unavailable.items() if who.allows(chat)}
            chat_problems = {chat: reason for chat, reason in chat_problems.items() if who.allows(chat)}
        problems += [f"{chat}: {reason}" for chat, reason in chat_problems.items()]
        body: dict[str, Any] = {"status": "degraded" if unavailable or problems else "ok", "chats": served,
                                "unavailable": unavailable}
        if problems:
            body["problems"] = problems
        return JSONResponse(body)

    async def search(self, request: Request, who: TokenEntry | None, params: SearchQuery) -> JSONResponse:
        arrival = request.scope.get(ARRIVAL, time.monotonic())
        chat = await self._chat(params.chat, who, self.search_pool)
        loop = asyncio.get_running_loop()
        recorded = await loop.run_in_executor(self.search_pool, functools.partial(
            recorded_search, self.retriever, chat, params.q, params.k, need_fresh=params.need_fresh,
            half_life_days=params.halflife_days, fresh_weight=params.fresh_weight, self_rag=params.self_rag,
            root=self.runs_root, variant=params.variant))
        hits = recorded.result.hits
        event_id = self.event_log.log(RetrievalEvent(
            user_id=params.user_id, session_id=params.session_id, chat_file=chat, query=params.q,
            returned_ids=[h.local_id for h in hits], method=VARIANT_METHODS[recorded.params["variant"]],
            counts_per_source=dict(Counter(source for h in hits for source in h.sources)),
            latency_ms=(time.monotonic() - arrival) * 1000, tokens_in_context=approx_tokens([h.text for h in hits]),
        ))
        meta = {
            "chat": chat,
            "query": params.q,
            "count": len(hits),
            "params": recorded.params,
            "reranker": "hybrid_score",
            "event_id": event_id,
            "timings_ms": recorded.result.timings_ms,
        }
        if recorded.run_error:
            log.warning("memory search: %s", recorded.run_error)
            meta["evidence_error"] = recorded.run_error
        return JSONResponse({
            "hits": [hit_json(h) for h in hits],
            "meta": meta,
            "evidence_path": str(recorded.run_path) if recorded.run_path else None,
        })

    async def ask(self, request: Request, who: TokenEntry | None, body: AskRequest) -> JSONResponse:
        arrival = request.scope.get(ARRIVAL, time.monotonic())
        chat = await self._chat(body.chat, who, self.ask_pool)
        answer, event_id = await self._answer(body, chat, arrival)
        return JSONResponse(answer.model_dump(by_alias=True, mode="json"), headers={"X-Retrieval-Event-Id": event_id})

    def _offline(self, body: AskRequest, chat: str, event_log: Any) -> Any:
        """``ask_logged`` without the LLM, in the ask pool (never the LLM pool); an awaitable."""
        return asyncio.get_running_loop().run_in_executor(self.ask_pool, functools.partial(
            ask_logged, self.retriever, chat, body.question, body.profile, None, body.mode, event_log,
            body.user_id, body.session_id))

    async def _answer(self, body: AskRequest, chat: str, arrival: float) -> tuple[AgentAnswer, str]:
        if self.llm is None or self.llm_pool is None:
            return await self._offline(body, chat, self.event_log)
        deadline_s = self.deadlines[body.profile]
        ends = arrival + deadline_s
        one = OneAnswer(self.event_log, arrival)
        future = self.llm_pool.submit(ask_by, ends, self.retriever, chat, body.question, body.profile, self.llm,
                                      body.mode, one.llm_log, body.user_id, body.session_id)
        if future is None:
            answer, event_id = await self._offline(body, chat, self.event_log)
            return _degraded(answer, "LLM pool busy"), event_id
        llm_answer = asyncio.wrap_future(future)
        offline = None
        try:
            reserve = min(self.offline_reserve_s, deadline_s / 2)
            done, _ = await asyncio.wait({llm_answer}, timeout=max(0.0, ends - reserve - time.monotonic()))
            if not done:  # start the offline answer now, so that it is ready at the deadline
                offline = asyncio.ensure_future(self._offline(body, chat, one.offline_log))
                done, _ = await asyncio.wait({llm_answer}, timeout=max(0.0, ends - time.monotonic()))
            failure = (asyncio.CancelledError() if llm_answer.cancelled() else llm_answer.exception()) if done else None
            if done and failure is None:
                return llm_answer.result()  # the LLM path logged its event (it claimed first)
            if done:
                log.error("ask: the LLM path failed; answering offline", exc_info=failure)
                reason = f"LLM path failed: {type(failure).__name__}"
            else:
                reason = f"deadline {deadline_s:g} s passed waiting for the LLM"
            if not one.take("offline"):  # the LLM answer claimed at the last moment: it is done now
                return await llm_answer
            self.llm_pool.withdraw(future)  # still waiting in the queue: never start it
            if offline is None:
                offline = asyncio.ensure_future(self._offline(body, chat, one.offline_log))
            answer, _ = await offline
            return _degraded(answer, reason), one.commit(one.deferred)
        except BaseException:
            self.llm_pool.withdraw(future)  # the caller went away: free the queue slot
            raise
        finally:
            if offline is not None and not offline.done():
                offline.cancel()  # the LLM answered: a speculative offline answer not started yet never starts
            if not llm_answer.done():
                llm_answer.add_done_callback(discard)
