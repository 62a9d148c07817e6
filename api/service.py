"""The memory service behind the routes: who is asking (token), which chats they may read, and the
search, ask and health endpoints, each in its own thread pool (searches, offline asks, and the
LLM bulkhead for asks with an LLM). Asks and searches are bounded per client (``api.limits``),
asks also by their profile's deadline, and stopped when their client hangs up (``api.stopping``);
health and the chat checks answer from the in-memory ``api.store_state``, read on its own thread
(never queued behind searches). No response carries a server path. The search endpoint is
``api.search_endpoint``, mixed in.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import JSONResponse

from api.access import TokenEntry, TokenStore
from api.across_chats import ask_by_chats, ask_logged_chats, select_readable
from api.bulkhead import LLMPool, OneAnswer, discard
from api.limits import ARRIVAL, AskLimits, ClientLimiter, SearchLimits, client_key
from api.requests import ApiError, AskRequest, error_response
from api.responses import without_paths
from api.search_endpoint import SearchEndpoint
from api.stopping import AskStopped, StoppableRetriever, StopSignal, client_gone
from api.store_state import DEFAULT_REFRESH_S, HEALTH_WAIT_S, StoreState
from narrative_mirror import Memory, regressions
from narrative_mirror.agent.contract import answer_json
from narrative_mirror.chat_time import Clocks
from narrative_mirror.events.record import tenant_user

if TYPE_CHECKING:
    from narrative_mirror import Home
    from narrative_mirror.agent.contract import AgentAnswer
    from narrative_mirror.events.writer import EventLog
    from narrative_mirror.llm import LLMClient
    from narrative_mirror.retrieval.engine import Retriever

log = logging.getLogger(__name__)


def _degraded(answer: AgentAnswer, reason: str) -> AgentAnswer:
    return answer.model_copy(update={"degraded": True, "degraded_reason": reason})


class MemoryApi(SearchEndpoint):
    """The endpoints over one retriever and event log: authentication, the chat checks, and the
    search, ask and health answers (``create_app`` routes requests here)."""

    def __init__(
        self,
        retriever: Retriever,
        event_log: EventLog,
        llm: LLMClient | None,
        runs_root: Path | None,
        *,
        tokens: TokenStore | None,
        unavailable: Mapping[str, str],
        deadlines: Mapping[str, float],
        llm_workers: int,
        llm_queue: int,
        search_workers: int,
        ask_workers: int,
        offline_reserve_s: float,
        limits: AskLimits | None = None,
        search_limits: SearchLimits | None = None,
        refresh_s: float = DEFAULT_REFRESH_S,
        home: Home | None = None,
    ):
        self.retriever, self.event_log, self.llm, self._runs_root = retriever, event_log, llm, runs_root
        self.memory = Memory(home, retriever=retriever, event_log=event_log, llm=llm)
        self.standing: regressions.StandingView | None = None  # made on first use: NM_HOME is handed late
        self.tokens, self.deadlines = tokens, dict(deadlines)
        self.unavailable = {chat: without_paths(reason) for chat, reason in unavailable.items()}
        self.offline_reserve_s = offline_reserve_s
        self.store_state = StoreState(retriever, refresh_s)
        self.before_read: Callable[[str], None] | None = None  # called with each chat a request reads
        self.limiter = ClientLimiter(limits or AskLimits())
        self.search_limiter = ClientLimiter(search_limits or SearchLimits())
        self.asks_stopped: Counter[str] = Counter()  # "client gone" / "deadline": asks stopped before their end
        self.search_pool = ThreadPoolExecutor(search_workers, thread_name_prefix="nm-search")
        self.ask_pool = ThreadPoolExecutor(ask_workers, thread_name_prefix="nm-ask")
        self.state_pool = ThreadPoolExecutor(1, thread_name_prefix="nm-state")  # index readings for health and checks
        self.llm_pool = LLMPool(llm_workers, llm_queue) if llm is not None else None
        self.clocks: Clocks | None = None  # each chat's zone for an answer's times (mount_pages sets it)

    @property
    def home(self) -> Home:
        """The served home: ``create_app``'s, else NM_HOME's."""
        if self.memory.home is None:
            from resources import runtime

            self.memory.home = runtime.home()
        return self.memory.home

    @property
    def runs_root(self) -> Path:
        """Where recall runs and search records are written (default the home's recall runs)."""
        return self._runs_root if self._runs_root is not None else self.home.recall_runs

    def close(self) -> None:
        if self.llm_pool is not None:
            self.llm_pool.shutdown()
        self.search_pool.shutdown(wait=True, cancel_futures=True)
        self.ask_pool.shutdown(wait=True, cancel_futures=True)
        self.state_pool.shutdown(wait=True, cancel_futures=True)

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

    async def check_chat(self, chat: str, who: TokenEntry | None) -> str:
        """``chat`` if the token may read it (403 otherwise, whether it exists or not) and it is
        indexed (404; 503 when its build failed or the index cannot be read), from the in-memory
        reading of the index (``StoreState``: read again when the store changes)."""
        if who is not None and not who.allows(chat):
            raise ApiError(403, "chat", "this API token may not read that chat")
        if self.before_read is not None:  # e.g. a live chat another process added to (api.live)
            self.before_read(chat)
        if chat in self.unavailable:
            raise ApiError(503, "chat", "that chat is unavailable: its build failed (see /api/health)")
        reading = await self.store_state.current(self.state_pool)
        if chat not in reading.chats:
            if reading.error is not None:
                raise ApiError(503, None, "the index cannot be read right now (see /api/health)")
            raise ApiError(404, "chat", "no indexed chat has that key")
        return chat

    async def check_chats(
        self, chat: str | None, chats: list[str] | str | None, who: TokenEntry | None
    ) -> tuple[str, ...]:
        """The chats a request names: ``chat`` checked alone, or ``chats`` (keys and globs) with
        each glob expanded within the indexed chats the token may read (404 naming a glob that
        matches none of them, whether or not other chats would) and each key checked as ``chat``."""
        if chats is None:
            return (await self.check_chat(chat, who),)
        reading = await self.store_state.current(self.state_pool)
        chosen = select_readable(
            chats, reading.chats, lambda c: (who is None or who.allows(c)) and c not in self.unavailable
        )
        return tuple([await self.check_chat(c, who) for c in chosen])

    def early_refusal(self, scope: dict) -> ApiError | None:
        """The 429 of an ask or a search whose client is past its limits, decided before routing
        and before a body is read (a flood's refusals stay cheap); None lets the request through."""
        limiter = {("POST", "/api/ask"): self.limiter, ("GET", "/api/memory/search"): self.search_limiter}.get(
            (scope.get("method"), scope.get("path"))
        )
        if limiter is None:
            return None
        who = None
        if self.tokens is not None:
            header = next((value for name, value in scope.get("headers", ()) if name.lower() == b"authorization"), b"")
            scheme, _, token = header.decode("latin-1").partition(" ")
            try:
                who = self.tokens.authenticate(token.strip()) if scheme.lower() == "bearer" else None
            except Exception:  # noqa: BLE001 - the route answers for a token file that cannot be used
                return None
            if who is None:
                return None  # the route answers 401
        return limiter.refusal() if limiter.full(client_key(who, scope)) else None

    # -- endpoints -------------------------------------------------------------------------------------
    async def health(self, who: TokenEntry | None) -> JSONResponse:
        """``ok``, or ``degraded`` with the reasons: chats whose build failed (``unavailable``),
        and ``problems``: an index that cannot be read or has no messages table, a chat served
        before that has no rows now, an event store that refuses writes (``EventLog.state``).
        Answered from memory (``StoreState``), read again when the store changes on disk or the
        reading is old, so health is ``ok`` again as soon as the store is repaired, without a restart."""
        reading = await self.store_state.current(self.state_pool, wait_s=HEALTH_WAIT_S)
        problems: list[str] = []
        chat_problems: dict[str, str] = {}
        if reading.error is not None:
            problems.append(reading.error)
        else:
            if not reading.table_exists:
                problems.append("index: no messages table (the store is missing or was never built)")
            # chats this service has seen indexed: one without rows now is lost, not unknown
            for chat in sorted(self.store_state.seen - reading.chats - set(self.unavailable)):
                chat_problems[chat] = "no rows in the index"
        if (event_problem := self.event_log.state().problem()) is not None:  # failing now, with the reason
            problems.append(event_problem)
        served = sorted(chat for chat in reading.chats if chat not in self.unavailable)
        unavailable = dict(sorted(self.unavailable.items()))
        if who is not None:
            served = who.visible(served)
            unavailable = {chat: reason for chat, reason in unavailable.items() if who.allows(chat)}
            chat_problems = {chat: reason for chat, reason in chat_problems.items() if who.allows(chat)}
        problems += [f"{chat}: {reason}" for chat, reason in chat_problems.items()]
        body: dict[str, Any] = {
            "status": "degraded" if unavailable or problems else "ok",
            "chats": served,
            "unavailable": unavailable,
        }
        if problems:
            body["problems"] = problems
        # Evaluations whose checks failed and still stand: the service works, its quality regressed.
        standing = [
            regressions.describe(entry)
            for entry in self._standing_regressions()
            if who is None or who.allows(entry["partition"])
        ]
        if standing:
            body["regressions"] = standing
        return JSONResponse(body)

    def _standing_regressions(self) -> list[dict[str, Any]]:
        try:
            if self.standing is None:
                self.standing = regressions.StandingView(self.home.root)
            return list(self.standing.current().values())
        except ValueError as exc:  # a damaged file is reported, not a failed health check
            return [
                {
                    "asset": "evaluation",
                    "partition": "",
                    "run_id": "-",
                    "checks": [{"check": "standing_regressions", "severity": "ERROR", "description": str(exc)}],
                }
            ]

    async def ask(self, request: Request, who: TokenEntry | None, body: AskRequest) -> JSONResponse:
        answered = await self.answer_for(request, who, body)
        if answered is None:
            return error_response(499, None, "the client closed the request")
        answer, event_id = answered
        return JSONResponse(
            answer_json(answer, self.clocks, event_id=event_id), headers={"X-Retrieval-Event-Id": event_id}
        )

    async def answer_for(
        self, request: Request, who: TokenEntry | None, body: AskRequest
    ) -> tuple[AgentAnswer, str] | None:
        """(answer, event id) of an ask (the API's and the inspector's), within the client's ask
        limits (429 past them) and the profile's deadline; None when the client hung up, whose
        work stops at its next step (or never starts)."""
        arrival = request.scope.get(ARRIVAL, time.monotonic())
        chats = await self.check_chats(body.chat, body.chats, who)
        body = body.model_copy(update={"user_id": tenant_user(who and who.name, body.user_id)})
        ends = arrival + self.deadlines[body.profile]
        # Offline, the deadline stops the ask itself; with an LLM, it picks the answer (see _answer).
        signal = StopSignal(ends if self.llm is None else math.inf)
        work = asyncio.ensure_future(self._limited(client_key(who, request.scope), body, chats, arrival, signal))
        gone = asyncio.ensure_future(client_gone(request))
        try:
            await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            stopped = not work.done()  # the client went away (or the server stops): nobody reads the answer
            if stopped:
                signal.stop("its client disconnected")
                work.cancel()
                await asyncio.wait({work})  # its slot is free and its queued work withdrawn when this returns
                self.asks_stopped["client gone"] += 1
                log.info("ask: the client disconnected; its ask was stopped")
        if stopped:
            if not work.cancelled():
                work.exception()  # finished as the client left: consumed, nobody reads it
            return None
        return work.result()

    async def _limited(
        self, client: str, body: AskRequest, chats: tuple[str, ...], arrival: float, signal: StopSignal
    ) -> tuple[AgentAnswer, str]:
        """``_answer`` in one of the client's ask slots (429 when they and its queue are full); an
        ask still waiting for a slot at its deadline is refused with 503 without starting."""
        loop = asyncio.get_running_loop()
        wait_until = loop.time() + (arrival + self.deadlines[body.profile] - time.monotonic())
        try:
            async with self.limiter.slot(client, wait_until):
                return await self._answer(body, chats, arrival, signal)
        except TimeoutError:
            raise self._past_deadline(body.profile, "waiting for one of this client's ask slots") from None

    def _past_deadline(self, profile: str, where: str) -> ApiError:
        self.asks_stopped["deadline"] += 1
        return ApiError(
            503,
            None,
            f"the ask did not finish within the {profile} profile's deadline of "
            f"{self.deadlines[profile]:g} s ({where}); retry later or with a faster profile",
            headers={"Retry-After": str(self.limiter.limits.retry_after_s)},
        )

    def _offline(self, body: AskRequest, chats: tuple[str, ...], event_log: Any, signal: StopSignal) -> Any:
        """``ask_logged`` without the LLM, in the ask pool (never the LLM pool), stopped at its next
        step once ``signal`` is set; an awaitable."""
        memory = self.memory.using(retriever=StoppableRetriever(self.retriever, signal), llm=None, event_log=event_log)
        return asyncio.get_running_loop().run_in_executor(
            self.ask_pool,
            functools.partial(
                ask_logged_chats, memory, chats, body.question, body.profile, body.mode, body.user_id, body.session_id
            ),
        )

    async def _answer(
        self, body: AskRequest, chats: tuple[str, ...], arrival: float, signal: StopSignal
    ) -> tuple[AgentAnswer, str]:
        if self.llm is None or self.llm_pool is None:
            try:
                return await asyncio.wait_for(
                    self._offline(body, chats, self.event_log, signal), max(0.0, signal.ends - time.monotonic())
                )
            except (TimeoutError, AskStopped):
                signal.stop("its deadline passed")  # a running ask stops at its next step
                raise self._past_deadline(body.profile, "answering offline") from None
        deadline_s = self.deadlines[body.profile]
        ends = arrival + deadline_s
        one = OneAnswer(self.event_log, arrival)
        memory = self.memory.using(retriever=StoppableRetriever(self.retriever, signal), event_log=one.llm_log)
        future = self.llm_pool.submit(
            ask_by_chats, ends, memory, chats, body.question, body.profile, body.mode, body.user_id, body.session_id
        )
        if future is None:
            answer, event_id = await self._offline(body, chats, self.event_log, signal)
            return _degraded(answer, "LLM pool busy"), event_id
        llm_answer = asyncio.wrap_future(future)
        offline = None
        try:
            reserve = min(self.offline_reserve_s, deadline_s / 2)
            done, _ = await asyncio.wait({llm_answer}, timeout=max(0.0, ends - reserve - time.monotonic()))
            if not done:  # start the offline answer now, so that it is ready at the deadline
                offline = asyncio.ensure_future(self._offline(body, chats, one.offline_log, signal))
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
                offline = asyncio.ensure_future(self._offline(body, chats, one.offline_log, signal))
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
