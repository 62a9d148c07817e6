"""Who is looking at a page. Open API: everyone on this machine (the guard's Host rule). With
tokens: the token of the request's ``Authorization: Bearer`` header, else of the ``nm_token``
cookie that the login page sets (HttpOnly, SameSite=Strict, Path=/; Secure over https): the
browser keeps the token where page scripts cannot read it and never sends it with a request
another site starts. A page without a known token redirects to ``/login``."""

from __future__ import annotations

import json
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from api.access import TokenEntry
from api.requests import MAX_BODY_BYTES, error_response
from api.service import MemoryApi

COOKIE = "nm_token"


class LoginNeeded(Exception):
    """A page asked for without a known token: the browser is sent to the login page."""

    def __init__(self, target: str):
        super().__init__(target)
        self.target = target


def safe_target(target: str | None) -> str:
    """Where the login page may send the browser after signing in: a path of this site only."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/chats"
    return target


def page_target(request: Request) -> str:
    query = request.url.query
    return request.url.path + (f"?{query}" if query else "")


def presented_token(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.cookies.get(COOKIE) or None


def page_principal(api: MemoryApi, request: Request) -> TokenEntry | None:
    """The token's entry (None when the API is open); ``LoginNeeded`` without a known token."""
    if api.tokens is None:
        return None
    entry = api.tokens.authenticate(presented_token(request) or "")
    if entry is None:
        raise LoginNeeded(page_target(request))
    return entry


def login_location(target: str) -> str:
    return "/login?next=" + quote(safe_target(target), safe="")


async def sign_in(api: MemoryApi, request: Request) -> Response:
    """``POST /login`` with JSON ``{"token": "..."}`` (the guard admits JSON bodies only): 204 and
    the cookie for a known token, 401 otherwise."""
    if api.tokens is None:
        return Response(status_code=204)
    body = await request.body()
    if len(body) > MAX_BODY_BYTES:
        return error_response(413, None, f"request body larger than {MAX_BODY_BYTES} bytes")
    try:
        token = json.loads(body).get("token")
    except (ValueError, AttributeError):
        token = None
    if not isinstance(token, str) or api.tokens.authenticate(token.strip()) is None:
        return error_response(401, "token", "unknown API token")
    response = Response(status_code=204)
    response.set_cookie(COOKIE, token.strip(), httponly=True, samesite="strict", path="/",
                        secure=request.url.scheme == "https")
    return response


async def sign_out() -> Response:
    response = JSONResponse({"signed_out": True})
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response
