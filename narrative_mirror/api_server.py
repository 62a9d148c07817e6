"""The search HTTP API (seed 004), a Starlette app over one retriever:

- ``GET /api/memory/search?q=...&chat=...&k=5&need_fresh=0|1&halflife_days=7&fresh_weight=0.9&self_rag=0|1``
  (optional ``user_id``, ``session_id``) -> ``{hits, meta, evidence_path}``; every call writes a
  recall-run record (``evidence_path``) and a retrieval event (``meta.event_id``).
- ``POST /api/ask`` with JSON ``{chat, question, profile?, mode?, user_id?, session_id?}`` ->
  the agent answer contract (``AgentAnswer`` by alias); the event id is in the
  ``X-Retrieval-Event-Id`` header. The agent's evidence ids are the event's cited ids.

Every parameter is validated; errors are JSON ``{"error": {"field", "message"}}`` with 400
(bad value), 404 (unknown chat), 413 (body too large). Blocking work (search, agent) runs in
Starlette's thread pool. Served on loopback by default (``serve``): there is no authentication.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import math
import re
import time
from collections import Counter
from collections.abc import Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from narrative_mirror.agent.profiles import DEFAULT_PROFILE, PROFILES
from narrative_mirror.events import EventLog, RetrievalEvent, approx_tokens
from narrative_mirror.index_store import validate_chat_file
from narrative_mirror.logged_query import ask_logged
from narrative_mirror.query import MODES
from narrative_mirror.recall_runs import recorded_search

if TYPE_CHECKING:
    from narrative_mirror.llm import LLMClient
    from narrative_mirror.retrieval.engine import Hit, Retriever

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


class ApiError(Exception):
    def __init__(self, status: int, field: str | None, message: str):
        super().__init__(message)
        self.status, self.field, self.message = status, field, message


def _error(status: int, field: str | None, message: str) -> JSONResponse:
    return JSONResponse({"error": {"field": field, "message": message}}, status_code=status)


# -- parameter parsing -------------------------------------------------------------------------------
def _text(value: Any, name: str, max_chars: int) -> str:
    if not isinstance(value, str):
        raise ApiError(400, name, f"{name} must be a string")
    value = value.strip()
    if not value:
        raise ApiError(400, name, f"{name} must not be empty")
    if len(value) > max_chars:
        raise ApiError(400, name, f"{name} is {len(value)} characters long; at most {max_chars} are allowed")
    return value


def _identifier(value: Any, name: str) -> str:
    value = _text(value, name, MAX_ID_CHARS)
    if _CONTROL.search(value):
        raise ApiError(400, name, f"{name} must not contain control characters")
    return value


def _flag(value: str | None, name: str) -> bool:
    if value is None:
        return False
    if value not in ("0", "1"):
        raise ApiError(400, name, f"{name} must be 0 or 1, got {value!r}")
    return value == "1"


def _positive(value: str | None, name: str, upper: float) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        raise ApiError(400, name, f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(number) or not 0 < number <= upper:
        raise ApiError(400, name, f"{name} must be > 0 and <= {upper:g}, got {value!r}")
    return number


def _k(value: str | None) -> int:
    if value is None:
        return 5
    if not _INT.match(value) or not 1 <= int(value) <= MAX_K:
        raise ApiError(400, "k", f"k must be an integer from 1 to {MAX_K}, got {value!r}")
    return int(value)


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


# -- the app -------------------------------------------------------------------------------------------
class _MemoryApi:
    def __init__(self, retriever: Retriever, event_log: EventLog, llm: LLMClient | None, runs_root: Path | None):
        self.retriever, self.event_log, self.llm, self.runs_root = retriever, event_log, llm, runs_root
        self._chats: frozenset[str] = frozenset()

    async def _chat(self, value: Any) -> str:
        chat = _text(value, "chat", MAX_ID_CHARS)
        try:
            validate_chat_file(chat)
        except ValueError as exc:
            raise ApiError(400, "chat", str(exc)) from None
        if chat not in self._chats:  # re-read the store: the chat may have been indexed since
            self._chats = frozenset(await run_in_threadpool(self.retriever.chat_files))
            if chat not in self._chats:
                raise ApiError(404, "chat", f"unknown chat {chat!r}; indexed chats: {sorted(self._chats)}")
        return chat

    async def search(self, request: Request) -> JSONResponse:
        started = time.perf_counter()
        query_params = request.query_params
        unknown = sorted(set(query_params.keys()) - set(SEARCH_PARAMS))
        if unknown:
            raise ApiError(400, unknown[0], f"unknown parameters {unknown}; allowed: {list(SEARCH_PARAMS)}")
        repeated = sorted(name for name in query_params.keys() if len(query_params.getlist(name)) > 1)
        if repeated:
            raise ApiError(400, repeated[0], f"parameters given more than once: {repeated}")
        if "q" not in query_params:
            raise ApiError(400, "q", "q (the query) is required")
        query = _text(query_params["q"], "q", MAX_QUERY_CHARS)
        if "chat" not in query_params:
            raise ApiError(400, "chat", "chat (the chat file) is required")
        k = _k(query_params.get("k"))
        need_fresh = _flag(query_params.get("need_fresh"), "need_fresh")
        self_rag = _flag(query_params.get("self_rag"), "self_rag")
        half_life = _positive(query_params.get("halflife_days"), "halflife_days", MAX_HALF_LIFE_DAYS)
        fresh_weight = _positive(query_params.get("fresh_weight"), "fresh_weight", MAX_FRESH_WEIGHT)
        user_id = _identifier(query_params.get("user_id", DEFAULT_USER), "user_id")
        session_id = _identifier(query_params["session_id"], "session_id") if "session_id" in query_params else None
        chat = await self._chat(query_params["chat"])

        recorded = await run_in_threadpool(
            recorded_search, self.retriever, chat, query, k, need_fresh=need_fresh, half_life_days=half_life,
            fresh_weight=fresh_weight, self_rag=self_rag, root=self.runs_root)
        hits = recorded.result.hits
        event_id = self.event_log.log(RetrievalEvent(
            user_id=user_id, session_id=session_id, chat_file=chat, query=query,
            returned_ids=[h.local_id for h in hits], method="hybrid",
            counts_per_source=dict(Counter(source for h in hits for source in h.sources)),
            latency_ms=(time.perf_counter() - started) * 1000, tokens_in_context=approx_tokens([h.text for h in hits]),
        ))
        meta = {
            "chat": chat,
            "query": query,
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

    async def ask(self, request: Request) -> JSONResponse:
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
            raise ApiError(413, None, f"request body larger than {MAX_BODY_BYTES} bytes")
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            raise ApiError(413, None, f"request body larger than {MAX_BODY_BYTES} bytes")
        try:
            payload = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ApiError(400, None, f"body must be a JSON object: {exc}") from None
        if not isinstance(payload, Mapping):
            raise ApiError(400, None, "body must be a JSON object")
        unknown = sorted(set(payload) - set(ASK_FIELDS))
        if unknown:
            raise ApiError(400, unknown[0], f"unknown fields {unknown}; allowed: {list(ASK_FIELDS)}")
        if "question" not in payload:
            raise ApiError(400, "question", "question is required")
        question = _text(payload["question"], "question", MAX_QUERY_CHARS)
        profile = payload.get("profile", DEFAULT_PROFILE)
        if profile not in PROFILES:
            raise ApiError(400, "profile", f"profile must be one of {sorted(PROFILES)}, got {profile!r}")
        mode = payload.get("mode", "agent")
        if mode not in MODES:
            raise ApiError(400, "mode", f"mode must be one of {list(MODES)}, got {mode!r}")
        user_id = _identifier(payload.get("user_id", DEFAULT_USER), "user_id")
        session_id = _identifier(payload["session_id"], "session_id") if payload.get("session_id") is not None else None
        if "chat" not in payload:
            raise ApiError(400, "chat", "chat (the chat file) is required")
        chat = await self._chat(payload["chat"])

        answer, event_id = await run_in_threadpool(
            ask_logged, self.retriever, chat, question, profile, self.llm, mode, self.event_log, user_id, session_id)
        return JSONResponse(answer.model_dump(by_alias=True, mode="json"),
                            headers={"X-Retrieval-Event-Id": event_id})


async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
    return _error(exc.status, exc.field, exc.message)


async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    return _error(exc.status_code, None, str(exc.detail))


async def _server_error(request: Request, exc: Exception) -> JSONResponse:
    log.exception("memory API: %s %s failed", request.method, request.url.path)
    return _error(500, None, f"internal error: {type(exc).__name__}")


def create_app(
    retriever: Retriever,
    event_log: EventLog,
    llm: LLMClient | None = None,
    *,
    runs_root: Path | None = None,
) -> Starlette:
    """The API app. ``runs_root``: recall-run folder (default ``<NM_HOME>/recall_runs``).
    The event log is flushed and closed when the app shuts down."""
    api = _MemoryApi(retriever, event_log, llm, runs_root)

    @asynccontextmanager
    async def lifespan(app: Starlette):
        yield
        await run_in_threadpool(event_log.close)

    return Starlette(
        routes=[
            Route("/api/memory/search", api.search, methods=["GET"]),
            Route("/api/ask", api.ask, methods=["POST"]),
        ],
        exception_handlers={ApiError: _api_error, HTTPException: _http_error, Exception: _server_error},
        lifespan=lifespan,
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(app: Starlette, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Run ``app`` with uvicorn until interrupted (loopback unless told otherwise)."""
    import uvicorn

    if not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"port must be an integer from 1 to 65535, got {port!r}")
    if not _is_loopback(host):
        log.warning("serving the memory API on %s: it has no authentication, anyone who can reach it can query your chats", host)
    uvicorn.run(app, host=host, port=port, log_level="info")
