"""The app: ``create_app`` wires the memory service's routes, error handlers and arrival stamp
into a FastAPI app behind ``api.guard`` (Host, body type, security headers on every response);
its lifespan runs the warm-up before the server accepts a connection (readiness).
``check_host`` and ``serve`` refuse an open API on a non-loopback address; ``serve`` bounds slow
connections (``api.connections``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
import sys
import time
from collections.abc import Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from api.access import TokenEntry, TokenFileUnavailable, TokenStore
from api.bulkhead import check_deadlines
from api.connections import DEFAULT_KEEP_ALIVE_S, DEFAULT_REQUEST_TIMEOUT_S, server_config
from api.events_routes import mount_event_routes
from api.guard import Guard
from api.limits import ARRIVAL, AskLimits, SearchLimits
from api.pages import mount_pages
from api.requests import ApiError, AskRequest, SearchQuery, ask_request, bad_request, error_response, search_query
from api.service import MemoryApi
from api.store_state import DEFAULT_REFRESH_S
from narrative_mirror.safe_text import terminal_safe

if TYPE_CHECKING:
    from narrative_mirror import Home
    from narrative_mirror.events.writer import EventLog
    from narrative_mirror.llm import LLMClient
    from narrative_mirror.retrieval.engine import Retriever

log = logging.getLogger(__name__)

SWITCH_INTERVAL_S = 0.0005  # the interpreter lock's hand-over interval while the app serves (Python's default: 5 ms)


async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
    return error_response(exc.status, exc.field, exc.message, exc.headers)


async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    return error_response(exc.status_code, None, str(exc.detail), getattr(exc, "headers", None))


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    error = bad_request(list(exc.errors()), "parameter", ())
    return error_response(error.status, error.field, error.message)


async def _server_error(request: Request, exc: Exception) -> JSONResponse:
    log.exception("memory API: %s %s failed", request.method, terminal_safe(request.url.path))
    return error_response(500, None, f"internal error: {type(exc).__name__}")


async def _token_file_unavailable(request: Request, exc: TokenFileUnavailable) -> JSONResponse:
    # the path stays in the server log (logged once by the store): clients learn only that it is broken
    return error_response(
        503, None, "the API's token file cannot be used right now: every request is refused until the operator fixes it"
    )


async def _client_gone(request: Request, exc: ClientDisconnect) -> JSONResponse:
    # not a server fault: one line instead of the ~100-line traceback of an unhandled exception
    log.warning(
        "memory API: %s %s: the client disconnected before sending its whole body",
        request.method,
        terminal_safe(request.url.path),
    )
    return error_response(400, None, "the request body ended early: the client disconnected")


class _GuardedApi(FastAPI):
    """FastAPI with ``Guard`` outside every other layer, so even the 500s of Starlette's outermost
    error middleware carry the security headers."""

    def __init__(self, *, open_api: bool, **kwargs: Any):
        self.open_api = open_api
        super().__init__(**kwargs)

    def build_middleware_stack(self) -> Any:
        return Guard(super().build_middleware_stack(), open_api=self.open_api)


class _StampArrival:
    """ASGI middleware: records when each request arrived (deadlines count from there)."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            scope[ARRIVAL] = time.monotonic()
        await self.app(scope, receive, send)


class _EarlyRefusal:
    """ASGI middleware: an ask whose client is past its limits gets its 429 before routing and
    before its body is read (``MemoryApi.early_refusal``)."""

    def __init__(self, app: Any, api: MemoryApi):
        self.app, self.api = app, api

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        refusal = self.api.early_refusal(scope) if scope["type"] == "http" else None
        if refusal is not None:
            await _api_error_response(refusal)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _api_error_response(exc: ApiError) -> JSONResponse:
    return error_response(exc.status, exc.field, exc.message, exc.headers)


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
    ask_limits: AskLimits | None = None,
    search_limits: SearchLimits | None = None,
    state_refresh_s: float = DEFAULT_REFRESH_S,
    warm_up: Callable[[], Any] | None = None,
    home: Home | None = None,
) -> FastAPI:
    """The API app.

    ``runs_root``: recall-run folder (default ``<NM_HOME>/recall_runs``). ``tokens``: API tokens
    (``access.load_tokens``; None = open API, for loopback use). ``unavailable``: chats that failed
    to build, with the reason (shown by ``/api/health``). ``deadlines``: per-profile total deadline
    of an ask in seconds, overriding ``Profile.deadline_s``. ``llm_workers`` / ``llm_queue``: the
    LLM pool's threads and waiting slots; ``search_workers`` / ``ask_workers``: threads of the
    search pool and of the offline-ask pool. ``offline_reserve_s``: how long before the deadline
    the offline answer starts (at most half the deadline). ``ask_limits``: asks per client at work
    and waiting (``AskLimits()`` by default); ``search_limits``: the same for searches
    (``SearchLimits()``). ``state_refresh_s``: how old the in-memory reading
    of the index may get before it is read again (a local store is read again on every change).
    ``warm_up``: run (in a thread) before the app takes requests: ``serve`` accepts no connection
    until it returns (``api.readiness.warm_up``). ``home``: the served home's layout (the
    ``Memory`` the endpoints answer through). The event log is flushed and closed when the
    app shuts down.
    """
    for name, value, least in (
        ("search_workers", search_workers, 1),
        ("ask_workers", ask_workers, 1),
        ("llm_workers", llm_workers, 1),
        ("llm_queue", llm_queue, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    if not (isinstance(offline_reserve_s, int | float) and 0 <= offline_reserve_s < math.inf):
        raise ValueError(f"offline_reserve_s must be a number of seconds >= 0, got {offline_reserve_s!r}")
    if not (isinstance(state_refresh_s, int | float) and 0 < state_refresh_s < math.inf):
        raise ValueError(f"state_refresh_s must be a number of seconds > 0, got {state_refresh_s!r}")
    if tokens is not None and not isinstance(tokens, TokenStore):
        raise TypeError(f"tokens must be a TokenStore (access.load_tokens), got {type(tokens).__name__}")
    unavailable = dict(unavailable or {})
    for chat, reason in unavailable.items():
        if not isinstance(chat, str) or not isinstance(reason, str):
            raise ValueError(f"unavailable must map chat keys to reasons (strings), got {chat!r}: {reason!r}")
    api = MemoryApi(
        retriever,
        event_log,
        llm,
        runs_root,
        tokens=tokens,
        unavailable=unavailable,
        deadlines=check_deadlines(deadlines),
        llm_workers=llm_workers,
        llm_queue=llm_queue,
        search_workers=search_workers,
        ask_workers=ask_workers,
        offline_reserve_s=offline_reserve_s,
        limits=ask_limits,
        search_limits=search_limits,
        refresh_s=state_refresh_s,
        home=home,
    )
    if tokens is not None and not tokens.entries:
        log.warning("token file %s holds no tokens: every request will be refused", tokens.path)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if warm_up is not None:  # uvicorn binds its socket only after this: no request meets a cold embedder
            try:
                await asyncio.get_running_loop().run_in_executor(None, warm_up)
            except Exception as exc:  # a store that cannot be read now is health's to report, not a reason to stop
                log.warning("warm-up failed (%s): serving anyway; the first requests may be slow", type(exc).__name__)
        # A search that waits for the interpreter lock behind a running ask waits at most this long
        # per hand-over instead of 5 ms (docs/decisions.md: search p95 beside a flood of asks).
        switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        try:
            yield
        finally:
            sys.setswitchinterval(switch_interval)
        await asyncio.get_running_loop().run_in_executor(None, api.close)
        await asyncio.get_running_loop().run_in_executor(None, event_log.close)

    app = _GuardedApi(
        open_api=tokens is None,
        title="narrative-mirror",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    authenticated = Depends(api.principal)  # a default, not an Annotated alias: annotations are strings here

    @app.get("/api/memory/search")
    async def search(
        request: Request, who: TokenEntry | None = authenticated, params: SearchQuery = Depends(search_query)
    ):
        return await api.search(request, who, params)

    @app.post("/api/ask")
    async def ask(request: Request, who: TokenEntry | None = authenticated, body: AskRequest = Depends(ask_request)):
        return await api.ask(request, who, body)

    @app.get("/api/health")
    async def health(who: TokenEntry | None = authenticated):
        return await api.health(who)

    mount_event_routes(app, api, event_log)  # clients that answer themselves report citations
    mount_pages(app, api)  # the web inspector (api/pages): same process, same tokens
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(TokenFileUnavailable, _token_file_unavailable)
    app.add_exception_handler(ClientDisconnect, _client_gone)
    app.add_exception_handler(Exception, _server_error)
    app.add_middleware(_EarlyRefusal, api=api)
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


def serve(
    app: FastAPI,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    tokens_configured: bool | None = None,
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
    keep_alive_s: int = DEFAULT_KEEP_ALIVE_S,
) -> None:
    """Run ``app`` with uvicorn until interrupted. A host other than loopback needs API tokens
    (``tokens_configured``; None = whether ``app`` was created with a token store). A client has
    ``request_timeout_s`` to send each request and ``keep_alive_s`` of silence between requests."""
    import uvicorn

    if not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"port must be an integer from 1 to 65535, got {port!r}")
    if tokens_configured is None:
        tokens_configured = bool(getattr(app.state, "tokens_configured", False))
    check_host(host, tokens_configured)
    config = server_config(app, host, port, request_timeout_s=request_timeout_s, keep_alive_s=keep_alive_s)
    uvicorn.run(
        app, host=host, port=port, log_level="info", http=config.http, timeout_keep_alive=config.timeout_keep_alive
    )
