"""The API's requests: the pydantic models of a search query and an ask body, their field checks,
and the JSON error shape every refusal takes (``{"error": {"field", "message"}}``).

``search_query`` and ``ask_request`` are the FastAPI dependencies that turn a request into a
checked model or raise ``ApiError`` (400 for a bad, unknown or repeated name; 413 for a body
larger than ``MAX_BODY_BYTES``). No error message repeats a chat key.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, ValidationError

from narrative_mirror.agent.profiles import DEFAULT_PROFILE, profiles
from narrative_mirror.index_store import validate_chat_file
from narrative_mirror.query import MODES
from narrative_mirror.retrieval.config import VARIANTS
from narrative_mirror.safe_text import clip_line

MAX_QUERY_CHARS = 1000
MAX_K = 50
MAX_ID_CHARS = 200
MAX_HALF_LIFE_DAYS = 36500.0
MAX_FRESH_WEIGHT = 100.0
MAX_BODY_BYTES = 16_384
MAX_CHATS_CHARS = 4000  # a search's ``chats``: comma-separated keys and globs
MAX_CHAT_ITEMS = 100  # an ask's ``chats`` list
DEFAULT_USER = "anonymous"
SEARCH_PARAMS = (
    "q",
    "chat",
    "chats",
    "k",
    "need_fresh",
    "halflife_days",
    "fresh_weight",
    "self_rag",
    "variant",
    "tiers",
    "user_id",
    "session_id",
)
TIERS = range(0, 4)  # importance tiers, 0 (low) .. 3 (high)
ASK_FIELDS = ("chat", "chats", "question", "profile", "mode", "user_id", "session_id")
_INT = re.compile(r"^[0-9]{1,4}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class ApiError(Exception):
    """A refused request: its status, the field at fault (None: the request as a whole) and why."""

    def __init__(self, status: int, field: str | None, message: str, headers: Mapping[str, str] | None = None):
        super().__init__(message)
        self.status, self.field, self.message, self.headers = status, field, message, headers


def error_response(
    status: int, field: str | None, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """The body of every error: ``{"error": {"field", "message"}}`` (the message at most
    ``MAX_LINE_CHARS``, saying how long it was)."""
    return JSONResponse({"error": {"field": field, "message": clip_line(message)}}, status_code=status, headers=headers)


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


def _chat_selector(value: str) -> str:
    """Comma-separated chat keys and globs (``*`` = every chat the caller may read)."""
    for part in value.split(","):
        if part.strip():
            _chat_key(part.strip())
    if not any(part.strip() for part in value.split(",")):
        raise ValueError("must name a chat key or glob")
    return value


def _chat_items(value: list[str]) -> list[str]:
    if not value or len(value) > MAX_CHAT_ITEMS:
        raise ValueError(f"must be a list of 1 to {MAX_CHAT_ITEMS} chat keys or globs")
    return value


def _one_of(allowed: tuple[str, ...]) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value not in allowed:
            raise ValueError(f"must be one of {list(allowed)}")
        return value

    return check


def _known_profile(value: str) -> str:
    # The profiles of agent.toml as in effect at the request (an override applies without a restart).
    return _one_of(tuple(sorted(profiles())))(value)


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


def _tiers(value: Any) -> Any:
    """ "2,3" -> (2, 3): the importance tiers a search keeps."""
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",")]
        if not all(p.isdigit() and int(p) in TIERS for p in parts):
            raise ValueError(
                f"must be comma-separated importance tiers from {TIERS.start} to {TIERS.stop - 1}, got {value!r}"
            )
        return tuple(sorted({int(p) for p in parts}))
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
ChatSelector = Annotated[str, AfterValidator(_text(MAX_CHATS_CHARS)), AfterValidator(_chat_selector)]
Flag = Annotated[bool, BeforeValidator(_flag)]


class SearchQuery(BaseModel):
    """The query parameters of ``GET /api/memory/search`` (each a string in the URL)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    q: QueryText
    chat: ChatKey | None = None  # one chat
    chats: ChatSelector | None = None  # or several: keys and globs, comma-separated
    k: Annotated[int, BeforeValidator(_k)] = 5
    need_fresh: Flag = False
    halflife_days: Annotated[float, BeforeValidator(_positive(MAX_HALF_LIFE_DAYS))] | None = None
    fresh_weight: Annotated[float, BeforeValidator(_positive(MAX_FRESH_WEIGHT))] | None = None
    self_rag: Flag = False
    # The retrieval variant that ranks (None: retrieval.toml's default_variant, as `ask` uses).
    variant: Annotated[str, AfterValidator(_one_of(VARIANTS))] | None = None
    tiers: Annotated[tuple[int, ...], BeforeValidator(_tiers)] | None = None  # only these importance tiers
    user_id: Identifier = DEFAULT_USER
    session_id: Identifier | None = None

    def ranking(self) -> dict:
        """The keyword arguments of ``Memory.search`` / ``recorded_search`` that rank (one chat or several)."""
        return {
            "need_fresh": self.need_fresh,
            "half_life_days": self.halflife_days,
            "fresh_weight": self.fresh_weight,
            "self_rag": self.self_rag,
            "variant": self.variant,
        }


class AskRequest(BaseModel):
    """The JSON body of ``POST /api/ask``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    chat: ChatKey | None = None  # one chat
    chats: Annotated[list[ChatSelector], AfterValidator(_chat_items)] | None = None  # or several: keys and globs
    question: QueryText
    profile: Annotated[str, AfterValidator(_known_profile)] = DEFAULT_PROFILE
    mode: Annotated[str, AfterValidator(_one_of(tuple(MODES)))] = "agent"
    user_id: Identifier = DEFAULT_USER
    session_id: Identifier | None = None


def _one_chat_field(request: SearchQuery | AskRequest) -> None:
    """400 unless exactly one of ``chat`` and ``chats`` is given."""
    if request.chat is not None and request.chats is not None:
        raise ApiError(400, "chats", "give chat (one chat key) or chats (chat keys and globs), not both")
    if request.chat is None and request.chats is None:
        raise ApiError(400, "chat", 'chat is required (or chats: chat keys and globs, e.g. "slack_*")')


_MESSAGES = {"missing": "is required", "extra_forbidden": "is not allowed"}


def bad_request(errors: list[dict], where: str, allowed: tuple[str, ...]) -> ApiError:
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
        return ApiError(
            400, field, f"{field} {_MESSAGES.get(first['type'], first['msg'].removeprefix('Value error, '))}"
        )
    return ApiError(400, field, f"{field}: {first['msg'][:1].lower()}{first['msg'][1:]}")  # pydantic's type errors


async def search_query(request: Request) -> SearchQuery:
    params = request.query_params
    repeated = sorted(name for name in params.keys() if len(params.getlist(name)) > 1)
    if repeated:
        raise ApiError(400, repeated[0], f"parameters given more than once: {repeated}")
    try:
        query = SearchQuery.model_validate(dict(params))
    except ValidationError as exc:
        raise bad_request(exc.errors(), "parameter", SEARCH_PARAMS) from None
    _one_chat_field(query)
    return query


async def bounded_body(request: Request) -> bytes:
    """The request's body, 413 past ``MAX_BODY_BYTES`` (declared or sent)."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
        raise ApiError(413, None, f"request body larger than {MAX_BODY_BYTES} bytes")
    body = bytearray()
    async for chunk in request.stream():  # also bounds bodies sent without a length
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise ApiError(413, None, f"request body larger than {MAX_BODY_BYTES} bytes")
    return bytes(body)


async def ask_request(request: Request) -> AskRequest:
    body = await bounded_body(request)
    try:
        ask = AskRequest.model_validate_json(body)
    except ValidationError as exc:
        raise bad_request(exc.errors(), "field", ASK_FIELDS) from None
    _one_chat_field(ask)
    return ask
