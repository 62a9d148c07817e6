"""The search HTTP API (seed 004), a FastAPI app over one retriever:

- ``GET /api/memory/search?q=...&chat=...&k=5&need_fresh=0|1&halflife_days=7&fresh_weight=0.9&self_rag=0|1``
  (optional ``user_id``, ``session_id``) -> ``{hits, meta, evidence_path}``; every call writes a
  recall-run record (``evidence_path``) and a retrieval event (``meta.event_id``).
- ``POST /api/ask`` with JSON ``{chat, question, profile?, mode?, user_id?, session_id?}`` ->
  the agent answer contract (``AgentAnswer`` by alias); the event id is in the
  ``X-Retrieval-Event-Id`` header. The agent's evidence ids are the event's cited ids.
- ``GET /api/health`` -> ``{status: "ok"|"degraded", chats: [...], unavailable: {chat: reason}}``:
  the chats served and those that failed to build (``create_app(unavailable=...)``: such a chat
  is not served, even from an older index: its requests get 503).

Requests are validated by pydantic models (``SearchQuery``, ``AskRequest``); errors are JSON
``{"error": {"field", "message"}}`` with 400 (bad value or type, unknown or repeated parameter),
401 (no or unknown token), 403 (chat outside the token's scope), 404 (unknown chat), 413 (body
larger than 16 KiB), 503 (chat whose build failed). No error body names a chat.

Bulkheads: searches run in their own thread pool, asks without the LLM (and the offline answer
of an ask) in another, the LLM-calling ask work in a bounded pool (``llm_workers`` threads, at
most ``llm_queue`` waiting). Every ask with an LLM has a total deadline, its profile's
``deadline_s`` (``deadlines`` overrides), counted from the request's arrival: if the LLM answer
is not there by then, or the pool is full at arrival, the request returns the offline answer
(``ask_logged`` with ``llm=None``) marked ``degraded`` with the reason. The offline answer is
started ``offline_reserve_s`` before the deadline so it is ready in time; the LLM calls of the
ask end by the same deadline, so a hung LLM frees its worker when the request gives up on it. Exactly one retrieval
event is logged per ask: the one of the answer returned (a late LLM answer is dropped).

Access: with a token store (``narrative_mirror.access.load_tokens``) every endpoint needs
``Authorization: Bearer <token>`` and sees only the chats of the token's scope (403 for any other
chat, existing or not). Without one the API is open: ``serve`` then refuses a non-loopback host.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import math
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, ValidationError
from starlette.exceptions import HTTPException

from narrative_mirror.access import TokenEntry, TokenStore
from narrative_mirror.agent.profiles import DEFAULT_PROFILE, PROFILES
from narrative_mirror.events import VARIANT_METHODS, EventLog, RetrievalEvent, approx_tokens
from narrative_mirror.index_store import validate_chat_file
from narrative_mirror.logged_query import ask_logged
from narrative_mirror.query import MODES
from narrative_mirror.recall_runs import recorded_search

if TYPE_CHECKING:
    from narrative_mirror.agent.contract import AgentAnswer
    from narrative_mirror.llm import LLMClient
    from narrative_mirror.retrieval.engine import Retriever
    from narrative_mirror.retrieval.records import Hit

log = logging.getLogger(__name__)

MAX_QUERY_CHARS = 1000
MAX_K = 50
MAX_ID_CHARS = 200
MAX_HALF_LIFE_DAYS = 36500.0
MAX_FRESH_WEIGHT = 100.0
MAX_BODY_BYTES = 16_384
DEFAULT_USER = "anonymous"
SEARCH_PARAMS = ("q", "chat", "k", "need_fresh", "halflife_days", "fresh_weight", "self_rag", "user_id", "session_id")
ASK_FIELDS = ("chat", "question", "profile", "mode", "user_id", "session_id")
_INT = re.compile(r"^[0-9]{1,4}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ARRIVAL = "narrative_mirror.arrival"  # ASGI scope key: monotonic time the request arrived


class ApiError(Exception):
    def __init__(self, status: int, field: str | None, message: str, headers: Mapping[str, str] | None = None):
        super().__init__(message)
        self.status, self.field, self.message, self.headers = status, field, message, headers


def _error(status: int, field: str | None, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"field": field, "message": message}}, status_code=status, headers=headers)


# -- request models ------------------------------------------------------------------------------------
def _text(max_chars: int) -> Callable[[str], str]:
    def check(value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("must not be empty")
        if len(value) > max_chars:
            raise ValueError(f"is {len(value)} characters long; at most {max_chars} are allowed")
        return value

    return check


def _no_control(value: str) -> str:
    if _CONTROL.search(value):
        raise ValueError("must not contain control characters")
    return value


def _chat_key(value: str) -> str:
    try:
        return validate_chat_file(value)
    except ValueError:  # its message repeats the value: no chat names in error bodies
        raise ValueError("must be a chat key without quotes, backslashes or control characters") from None


def _one_of(allowed: tuple[str, ...]) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value not in allowed:
            raise ValueError(f"must be one of {list(allowed)}")
        return value

    return check


def _flag(value: Any) -> Any:
    if isinstance(value, str):
        if value not in ("0", "1"):
            raise ValueError(f"must be 0 or 1, got {value!r}")
        return value == "1"
    return value


def _k(value: Any) -> Any:
    if isinstance(value, str) and not (_INT.match(value) and 1 <= int(value) <= MAX_K):
        raise ValueError(f"must be an integer from 1 to {MAX_K}, got {value!r}")
    return value


def _positive(upper: float) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                raise ValueError(f"must be a number, got {value!r}") from None
            if not math.isfinite(number) or not 0 < number <= upper:
                raise ValueError(f"must be > 0 and <= {upper:g}, got {value!r}")
            return number
        return value

    return check


QueryText = Annotated[str, AfterValidator(_text(MAX_QUERY_CHARS))]
Identifier = Annotated[str, AfterValidator(_text(MAX_ID_CHARS)), AfterValidator(_no_control)]
ChatKey = Annotated[str, AfterValidator(_text(MAX_ID_CHARS)), AfterValidator(_chat_key)]
Flag = Annotated[bool, BeforeValidator(_flag)]


class SearchQuery(BaseModel):
    """The query parameters of ``GET /api/memory/search`` (each a string in the URL)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    q: QueryText
    chat: ChatKey
    k: Annotated[int, BeforeValidator(_k)] = 5
    need_fresh: Flag = False
    halflife_days: Annotated[float, BeforeValidator(_positive(MAX_HALF_LIFE_DAYS))] | None = None
    fresh_weight: Annotated[float, BeforeValidator(_positive(MAX_FRESH_WEIGHT))] | None = None
    self_rag: Flag = False
    user_id: Identifier = DEFAULT_USER
    session_id: Identifier | None = None


class AskRequest(BaseModel):
    """The JSON body of ``POST /api/ask``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    chat: ChatKey
    question: QueryText
    profile: Annotated[str, AfterValidator(_one_of(tuple(sorted(PROFILES))))] = DEFAULT_PROFILE
    mode: Annotated[str, AfterValidator(_one_of(tuple(MODES)))] = "agent"
    user_id: Identifier = DEFAULT_USER
    session_id: Identifier | None = None


_MESSAGES = {"missing": "is required", "extra_forbidden": "is not allowed"}


def _bad_request(errors: list[dict], where: str, allowed: tuple[str, ...]) -> ApiError:
    """One 400 for pydantic errors: unknown names first, then the first field in model order."""
    errors = sorted(errors, key=lambda e: e["type"] != "extra_forbidden")
    first = errors[0]
    loc = [part for part in first["loc"] if part not in ("query", "body")]
    field = str(loc[0]) if loc else None
    if first["type"] == "extra_forbidden":
        return ApiError(400, field, f"unknown {where} {field!r}; allowed: {list(allowed)}")
    if not field:
        return ApiError(400, None, f"body must be a JSON object: {first['msg']}")
    if first["type"] in _MESSAGES or first["type"] == "value_error":  # ours: "k must be ..."
        return ApiError(400, field, f"{field} {_MESSAGES.get(first['type'], first['msg'].removeprefix('Value error, '))}")
    return ApiError(400, field, f"{field}: {first['msg'][:1].lower()}{first['msg'][1:]}")  # pydantic's type errors


async def search_query(request: Request) -> SearchQuery:
    params = request.query_params
    repeated = sorted(name for name in params.keys() if len(params.getlist(name)) > 1)
    if repeated:
        raise ApiError(400, repeated[0], f"parameters given more than once: {repeated}")
    try:
        return SearchQuery.model_validate(dict(params))
    except ValidationError as exc:
        raise _bad_request(exc.errors(), "parameter", SEARCH_PARAMS) from None


async def ask_request(request: Request) -> AskRequest:
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
        raise ApiError(413, None, f"request body larger than {MAX_BODY_BYTES} bytes")
    body = bytearray()
    async for chunk in request.stream():  # also bounds bodies sent without a length
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise ApiError(413, None, f"request body larger than {MAX_BODY_BYTES} bytes")
    try:
        return AskRequest.model_validate_json(bytes(body))
    except ValidationError as exc:
        raise _bad_request(exc.errors(), "field", ASK_FIELDS) from None


def hit_json(hit: Hit) -> dict:
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


# -- the LLM bulkhead ----------------------------------------------------------------------------------
class LLMPool:
    """A bounded pool for LLM-calling work: ``workers`` daemon threads and at most ``queue_size``
    waiting tasks. ``submit`` refuses (None) instead of queueing more; ``withdraw`` takes back a
    task that has not started. Daemon threads: a hung LLM call never blocks the process exit.
    ``create_app`` checks ``workers`` (>= 1) and ``queue_size`` (>= 0)."""

    def __init__(self, workers: int = 4, queue_size: int = 16, name: str = "nm-llm"):
        self.workers, self.queue_size = workers, queue_size
        self._cond = threading.Condition()
        self._waiting: deque[tuple[Future, Callable[[], Any]]] = deque()
        self._running = 0
        self._closed = False
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True) for i in range(workers)]
        for thread in self._threads:
            thread.start()

    @property
    def running(self) -> int:
        return self._running

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future | None:
        """A future of ``fn(*args, **kwargs)``, or None when every worker and queue slot is taken."""
        with self._cond:
            if self._closed:
                raise RuntimeError("LLM pool is shut down")
            if self._running + len(self._waiting) >= self.workers + self.queue_size:
                return None
            future: Future = Future()
            self._waiting.append((future, functools.partial(fn, *args, **kwargs)))
            self._cond.notify()
            return future

    def withdraw(self, future: Future) -> bool:
        """Cancel ``future`` if it is still waiting (its slot is free at once); False if it runs."""
        with self._cond:
            for item in self._waiting:
                if item[0] is future:
                    self._waiting.remove(item)
                    future.cancel()
                    return True
        return False

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._closed:
                    self._cond.wait()
                if not self._waiting:
                    return
                future, call = self._waiting.popleft()
                if not future.set_running_or_notify_cancel():
                    continue
                self._running += 1
            try:
                result = call()
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting request
                future.set_exception(exc)
            else:
                future.set_result(result)
            finally:
                with self._cond:
                    self._running -= 1

    def shutdown(self) -> None:
        """Cancel waiting tasks and let the workers end after their current task (not waited for)."""
        with self._cond:
            self._closed = True
            while self._waiting:
                self._waiting.popleft()[0].cancel()
            self._cond.notify_all()


class _OneAnswer:
    """Decides once which path answers a request ("llm" or "offline"); only that path's retrieval
    event is logged. The LLM path claims when ``ask_logged`` logs (its last step), the offline path
    when the deadline passes; the loser's event is dropped."""

    def __init__(self, event_log: EventLog, arrival: float):
        self.event_log, self.arrival = event_log, arrival
        self._lock = threading.Lock()
        self.owner: str | None = None
        self.deferred: RetrievalEvent | None = None

    def take(self, owner: str) -> bool:
        with self._lock:
            if self.owner is None:
                self.owner = owner
            return self.owner == owner

    def commit(self, event: RetrievalEvent) -> str:
        event.latency_ms = (time.monotonic() - self.arrival) * 1000  # what the caller waited
        return self.event_log.log(event)

    @property
    def llm_log(self) -> _LateDropLog:
        return _LateDropLog(self)

    @property
    def offline_log(self) -> _KeepLog:
        return _KeepLog(self)


class _LateDropLog:
    """The event log ``ask_logged`` gets on the LLM path: logs if the LLM answer is the one
    returned, drops the event if the deadline passed first."""

    def __init__(self, one: _OneAnswer):
        self.one = one

    def log(self, event: RetrievalEvent) -> str:
        if self.one.take("llm"):
            return self.one.commit(event)
        log.info("ask: LLM answer arrived after the deadline; dropped (event %s not logged)", event.event_id)
        return event.event_id


class _KeepLog:
    """The event log of the speculative offline answer: keeps its event for ``_OneAnswer.commit``."""

    def __init__(self, one: _OneAnswer):
        self.one = one

    def log(self, event: RetrievalEvent) -> str:
        self.one.deferred = event
        return event.event_id


# -- the app -------------------------------------------------------------------------------------------
def _degraded(answer: AgentAnswer, reason: str) -> AgentAnswer:
    return answer.model_copy(update={"degraded": True, "degraded_reason": reason})


class _MemoryApi:
    def __init__(self, retriever: Retriever, event_log: EventLog, llm: LLMClient | None, runs_root: Path | None, *,
                 tokens: TokenStore | None, unavailable: Mapping[str, str], deadlines: Mapping[str, float],
                 llm_workers: int, llm_queue: int, search_workers: int, ask_workers: int, offline_reserve_s: float):
        self.retriever, self.event_log, self.llm, self.runs_root = retriever, event_log, llm, runs_root
        self.tokens, self.unavailable, self.deadlines = tokens, dict(unavailable), dict(deadlines)
        self.offline_reserve_s = offline_reserve_s
        self._chats: frozenset[str] = frozenset()
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
        loop = asyncio.get_running_loop()
        indexed = await loop.run_in_executor(self.search_pool, self.retriever.chat_files)
        self._chats = frozenset(indexed)
        served = sorted(chat for chat in indexed if chat not in self.unavailable)
        unavailable = dict(sorted(self.unavailable.items()))
        if who is not None:
            served = who.visible(served)
            unavailable = {chat: reason for chat, reason in unavailable.items() if who.allows(chat)}
        return JSONResponse({"status": "degraded" if unavailable else "ok", "chats": served,
                             "unavailable": unavailable})

    async def search(self, request: Request, who: TokenEntry | None, params: SearchQuery) -> JSONResponse:
        arrival = request.scope.get(_ARRIVAL, time.monotonic())
        chat = await self._chat(params.chat, who, self.search_pool)
        loop = asyncio.get_running_loop()
        recorded = await loop.run_in_executor(self.search_pool, functools.partial(
            recorded_search, self.retriever, chat, params.q, params.k, need_fresh=params.need_fresh,
            half_life_days=params.halflife_days, fresh_weight=params.fresh_weight, self_rag=params.self_rag,
            root=self.runs_root))
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
        arrival = request.scope.get(_ARRIVAL, time.monotonic())
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
        one = _OneAnswer(self.event_log, arrival)
        future = self.llm_pool.submit(_ask_by, ends, self.retriever, chat, body.question, body.profile, self.llm,
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
                llm_answer.add_done_callback(_discard)


def _ask_by(ends: float, retriever, chat: str, question: str, profile: str, llm: LLMClient, *args: Any) -> tuple[AgentAnswer, str]:
    """``ask_logged`` whose LLM calls end by ``ends`` (time.monotonic): the request's deadline, not
    the profile's default, so a hung LLM holds a worker no longer than the request waits for it."""
    with llm.deadline(max(0.0, ends - time.monotonic())):
        return ask_logged(retriever, chat, question, profile, llm, *args)


def _discard(future: asyncio.Future) -> None:
    """Consume the outcome of work whose answer is no longer wanted (no 'never retrieved' warning)."""
    if not future.cancelled() and future.exception() is not None:
        log.info("ask: abandoned work ended with %s", type(future.exception()).__name__)


async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
    return _error(exc.status, exc.field, exc.message, exc.headers)


async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    return _error(exc.status_code, None, str(exc.detail), getattr(exc, "headers", None))


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    error = _bad_request(list(exc.errors()), "parameter", ())
    return _error(error.status, error.field, error.message)


async def _server_error(request: Request, exc: Exception) -> JSONResponse:
    log.exception("memory API: %s %s failed", request.method, request.url.path)
    return _error(500, None, f"internal error: {type(exc).__name__}")


class _StampArrival:
    """ASGI middleware: records when each request arrived (deadlines count from there)."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            scope[_ARRIVAL] = time.monotonic()
        await self.app(scope, receive, send)


def _check_deadlines(deadlines: Mapping[str, float] | None) -> dict[str, float]:
    merged = {name: profile.deadline_s for name, profile in PROFILES.items()}
    for name, seconds in (deadlines or {}).items():
        if name not in PROFILES:
            raise ValueError(f"deadlines: unknown profile {name!r}; known: {sorted(PROFILES)}")
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not (math.isfinite(seconds) and seconds > 0):
            raise ValueError(f"deadlines[{name!r}] must be a number of seconds > 0, got {seconds!r}")
        merged[name] = float(seconds)
    return merged


def create_app(
    retriever: Retriever,
    event_log: EventLog,
    llm: LLMClient | None = None,
    *,
    runs_root: Path | None = None,
    tokens: TokenStore | None = None,
    unavailable: Mapping[str, str] | None = None,
    deadlines: Mapping[str, float] | None = None,
    llm_workers: int = 4,
    llm_queue: int = 16,
    search_workers: int = 8,
    ask_workers: int = 2,
    offline_reserve_s: float = 1.0,
) -> FastAPI:
    """The API app.

    ``runs_root``: recall-run folder (default ``<NM_HOME>/recall_runs``). ``tokens``: API tokens
    (``access.load_tokens``; None = open API, for loopback use). ``unavailable``: chats that failed
    to build, with the reason (shown by ``/api/health``). ``deadlines``: per-profile total deadline
    of an ask in seconds, overriding ``Profile.deadline_s``. ``llm_workers`` / ``llm_queue``: the
    LLM pool's threads and waiting slots; ``search_workers`` / ``ask_workers``: threads of the
    search pool and of the offline-ask pool. ``offline_reserve_s``: how long before the deadline
    the offline answer starts (at most half the deadline). The event log is flushed and closed
    when the app shuts down.
    """
    for name, value, least in (("search_workers", search_workers, 1), ("ask_workers", ask_workers, 1),
                               ("llm_workers", llm_workers, 1), ("llm_queue", llm_queue, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    if not (isinstance(offline_reserve_s, int | float) and 0 <= offline_reserve_s < math.inf):
        raise ValueError(f"offline_reserve_s must be a number of seconds >= 0, got {offline_reserve_s!r}")
    if tokens is not None and not isinstance(tokens, TokenStore):
        raise TypeError(f"tokens must be a TokenStore (access.load_tokens), got {type(tokens).__name__}")
    unavailable = dict(unavailable or {})
    for chat, reason in unavailable.items():
        if not isinstance(chat, str) or not isinstance(reason, str):
            raise ValueError(f"unavailable must map chat keys to reasons (strings), got {chat!r}: {reason!r}")
    api = _MemoryApi(retriever, event_log, llm, runs_root, tokens=tokens, unavailable=unavailable,
                     deadlines=_check_deadlines(deadlines), llm_workers=llm_workers, llm_queue=llm_queue,
                     search_workers=search_workers, ask_workers=ask_workers, offline_reserve_s=offline_reserve_s)
    if tokens is not None and not tokens.entries:
        log.warning("token file %s holds no tokens: every request will be refused", tokens.path)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        await asyncio.get_running_loop().run_in_executor(None, api.close)
        await asyncio.get_running_loop().run_in_executor(None, event_log.close)

    app = FastAPI(title="narrative-mirror", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    authenticated = Depends(api.principal)  # a default, not an Annotated alias: annotations are strings here

    @app.get("/api/memory/search")
    async def search(request: Request, who: TokenEntry | None = authenticated,
                     params: SearchQuery = Depends(search_query)):
        return await api.search(request, who, params)

    @app.post("/api/ask")
    async def ask(request: Request, who: TokenEntry | None = authenticated, body: AskRequest = Depends(ask_request)):
        return await api.ask(request, who, body)

    @app.get("/api/health")
    async def health(who: TokenEntry | None = authenticated):
        return await api.health(who)

    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _server_error)
    app.add_middleware(_StampArrival)
    app.state.api = api
    app.state.tokens_configured = tokens is not None
    return app


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_host(host: str, tokens_configured: bool) -> None:
    """ValueError unless ``host`` is loopback or API tokens are configured (call it before a long
    build; ``serve`` calls it too)."""
    if not _is_loopback(host) and not tokens_configured:
        raise ValueError(
            f"refusing to serve on {host}: no API tokens are configured, so anyone who can reach the port could "
            "read every chat. Create a token file with `narrative-mirror token add --tokens FILE --name NAME "
            "--chat PATTERN` (it prints the token once) and start with `serve --tokens FILE`, or serve on 127.0.0.1."
        )


def serve(app: FastAPI, host: str = "127.0.0.1", port: int = 8000, *, tokens_configured: bool | None = None) -> None:
    """Run ``app`` with uvicorn until interrupted. A host other than loopback needs API tokens
    (``tokens_configured``; None = whether ``app`` was created with a token store)."""
    import uvicorn

    if not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"port must be an integer from 1 to 65535, got {port!r}")
    if tokens_configured is None:
        tokens_configured = bool(getattr(app.state, "tokens_configured", False))
    check_host(host, tokens_configured)
    uvicorn.run(app, host=host, port=port, log_level="info")
