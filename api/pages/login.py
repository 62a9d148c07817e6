"""Who is looking at a page. Open API: everyone on this machine (the guard's Host rule). With
tokens: the token of the request's ``Authorization: Bearer`` header, else the session of the
``nm_session`` cookie that the login page sets (HttpOnly, SameSite=Strict, Path=/; Secure over
https): the browser keeps it where page scripts cannot read it and never sends it with a request
another site starts. The cookie holds no token: ``<name>.<expiry>.<HMAC>``, signed with a key
this process made at start (a restart signs everyone out), bound to the token's hash (a revoked or
replaced token ends its sessions) and valid ``SESSION_S`` at most, never past the token's own
expiry. A page without a known token or session redirects to ``/login``."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from datetime import UTC, datetime
from urllib.parse import quote, urlsplit

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from api.access import TIME_FORMAT, TokenEntry
from api.requests import MAX_BODY_BYTES, error_response
from api.service import MemoryApi

COOKIE = "nm_session"
SESSION_S = 12 * 3600
_SESSION_KEY = secrets.token_bytes(32)


class LoginNeeded(Exception):
    """A page asked for without a known token: the browser is sent to the login page."""

    def __init__(self, target: str):
        super().__init__(target)
        self.target = target


def safe_target(target: str | None) -> str:
    """Where the login page may send the browser after signing in: a path of this site only. No
    whitespace or control character anywhere (browsers drop tabs and newlines from a URL, so
    ``/\t/evil.example`` would become ``//evil.example``), no backslash, no scheme or host."""
    if (
        not target
        or not target.startswith("/")
        or target.startswith("//")
        or "\\" in target
        or any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in target)
    ):
        return "/chats"
    parts = urlsplit(target)
    return "/chats" if parts.scheme or parts.netloc else target


def page_target(request: Request) -> str:
    query = request.url.query
    return request.url.path + (f"?{query}" if query else "")


def _signature(name: str, digest: str, until: int) -> str:
    mac = hmac.new(_SESSION_KEY, f"{name}\n{digest}\n{until}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")


def session_value(entry: TokenEntry, now: float | None = None) -> tuple[str, int]:
    """The cookie value of a session of ``entry`` and its lifetime in seconds."""
    now = time.time() if now is None else now
    until = int(now) + SESSION_S
    if entry.expires is not None:
        until = min(until, int(datetime.strptime(entry.expires, TIME_FORMAT).replace(tzinfo=UTC).timestamp()))
    return f"{entry.name}.{until}.{_signature(entry.name, entry.sha256, until)}", max(0, until - int(now))


def session_entry(api: MemoryApi, value: str | None) -> TokenEntry | None:
    """The token a session cookie stands for, while its signature holds, it has not ended and the
    token is still in the file (unexpired, with the same hash); None otherwise."""
    if not value or len(value) > 200 or value.count(".") < 2:
        return None
    name, until, signature = value.rsplit(".", 2)  # a name may hold dots; the expiry and signature hold none
    if not until.isdigit() or int(until) <= time.time():
        return None
    entry = api.tokens.by_name(name) if api.tokens is not None else None
    if entry is None or not hmac.compare_digest(signature, _signature(name, entry.sha256, int(until))):
        return None
    return entry


def page_principal(api: MemoryApi, request: Request) -> TokenEntry | None:
    """The token's entry (None when the API is open); ``LoginNeeded`` without a known token or a
    valid session."""
    if api.tokens is None:
        return None
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        entry = api.tokens.authenticate(token.strip())
    else:
        entry = session_entry(api, request.cookies.get(COOKIE))
    if entry is None:
        raise LoginNeeded(page_target(request))
    return entry


def login_location(target: str) -> str:
    return "/login?next=" + quote(safe_target(target), safe="")


async def sign_in(api: MemoryApi, request: Request) -> Response:
    """``POST /login`` with JSON ``{"token": "..."}`` (the guard admits JSON bodies only): 204 and
    a session cookie for a known token, 401 otherwise."""
    if api.tokens is None:
        return Response(status_code=204)
    body = await request.body()
    if len(body) > MAX_BODY_BYTES:
        return error_response(413, None, f"request body larger than {MAX_BODY_BYTES} bytes")
    try:
        token = json.loads(body).get("token")
    except (ValueError, AttributeError):
        token = None
    entry = api.tokens.authenticate(token.strip()) if isinstance(token, str) else None
    if entry is None:
        return error_response(401, "token", "unknown API token")
    value, lifetime = session_value(entry)
    response = Response(status_code=204)
    response.set_cookie(
        COOKIE,
        value,
        max_age=lifetime,
        httponly=True,
        samesite="strict",
        path="/",
        secure=request.url.scheme == "https",
    )
    return response


async def sign_out() -> Response:
    response = JSONResponse({"signed_out": True})
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response
