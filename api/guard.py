"""What every request and response of ``serve`` passes through: ``Guard``, a pure ASGI middleware
(no ``BaseHTTPMiddleware``: it would buffer streamed responses and break cancellation).

- Open API (no tokens): only this machine's pages may talk to it. A request whose ``Host`` is not
  a loopback name (``localhost``, ``127.x.y.z``, ``[::1]``, each with or without a port) gets 403:
  a web page on another origin whose name was rebound to 127.0.0.1 (DNS rebinding) sends its own
  name as Host. With tokens the Host is not restricted: the token protects.
- ``POST`` bodies must be ``application/json`` (415 otherwise): ``text/plain``, form and
  multipart POSTs are what a browser sends cross-site without a CORS preflight.
- No CORS: no ``Access-Control-*`` header ever leaves (an OPTIONS preflight gets no permission).
- A request another site started (``Sec-Fetch-Site: cross-site`` or ``same-site``, or an
  ``Origin`` that is not the request's own Host) may only open a page: 403 for any API request,
  any method but GET/HEAD, and any page that would run work (an ask or story page with ``q``), so
  a link or image on another site never runs an ask or a search, in the open API as with tokens.
- Redirects are relative (``Location: /chats``, never ``http://<Host>/chats``): a foreign Host
  is never echoed back.
- ``security_headers`` on every response, errors and 404s included: ``nosniff``, no referrer,
  same-origin resource policy and a content policy. A response may set its own policy (the web
  pages: ``PAGE_CSP``); any other gets ``API_CSP``, which allows nothing.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

from api.requests import error_response

API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
# The inspector's pages (api/pages): this site's own script, styles and images only; no inline script
# or style, no frames, forms and fetches to this site only.
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_PORT = re.compile(r"^(:[0-9]{1,5})?$")
_CSP = b"content-security-policy"
_LOCATION = b"location"
_CROSS = {b"cross-site", b"same-site"}


def security_headers(csp: str = API_CSP) -> dict[str, str]:
    """The headers every response carries; ``csp`` is the content policy (pages pass ``PAGE_CSP``)."""
    return {
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": csp,
        "Referrer-Policy": "no-referrer",
        "Cross-Origin-Resource-Policy": "same-origin",
    }


_FORCED = [
    (name.lower().encode(), value.encode())
    for name, value in security_headers().items()
    if name.lower().encode() != _CSP
]
_FORCED_NAMES = {name for name, _ in _FORCED}
_DEFAULT_CSP = (_CSP, API_CSP.encode())


def is_loopback_host(host: str) -> bool:
    """True when a ``Host`` header value names this machine: ``localhost``, an IPv4 address in
    127.0.0.0/8 or ``[::1]``, with or without a port (names compared case-insensitively)."""
    value = host.strip().lower()
    if not value.isascii():
        return False
    if value.startswith("["):
        name, bracket, port = value[1:].partition("]")
        if not bracket:
            return False
    else:
        name, colon, port = value.partition(":")
        port = colon + port
    if not _PORT.match(port):
        return False
    if name == "localhost" and not value.startswith("["):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    return address.is_loopback and (address.version == 6) == value.startswith("[")


def _relative(location: bytes) -> bytes:
    """A redirect's target without scheme and host (``http://evil.example/chats`` -> ``/chats``)."""
    parts = urlsplit(location.decode("latin-1"))
    if not parts.scheme and not parts.netloc:
        return location
    path = "/" + parts.path.lstrip("/")
    return (path + (f"?{parts.query}" if parts.query else "")).encode("latin-1")


def _cross_site(headers: list[tuple[bytes, bytes]]) -> bool:
    """True when the browser says another site started the request (Sec-Fetch-Site), or, from a
    browser that does not say, its Origin names another host than its Host (Sec-Fetch-Site is the
    browser's own view, right behind a proxy that rewrites the Host too)."""
    fetch_sites = [value.strip().lower() for name, value in headers if name == b"sec-fetch-site"]
    if fetch_sites:
        return fetch_sites[0] in _CROSS
    origins = [value for name, value in headers if name == b"origin"]
    if not origins:
        return False
    hosts = [value.strip().lower() for name, value in headers if name == b"host"]
    origin = origins[0].strip().lower()
    return origin == b"null" or urlsplit(origin.decode("latin-1")).netloc.encode("latin-1") not in hosts


def _plain_page(scope: dict) -> bool:
    """A GET or HEAD of a page that runs nothing: no API route, no question asked."""
    if scope["method"] not in ("GET", "HEAD") or scope.get("path", "").startswith("/api/"):
        return False
    return "q" not in parse_qs(scope.get("query_string", b"").decode("latin-1"))


def _media_type(content_type: str) -> str:
    return content_type.partition(";")[0].strip().lower()


class Guard:
    """ASGI middleware: refuses a foreign Host (open API only) and a POST body that is not JSON,
    and puts ``security_headers`` on (and takes ``Access-Control-*`` off) every response."""

    def __init__(self, app: Any, *, open_api: bool):
        self.app, self.open_api = app, open_api

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_guarded(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (name, _relative(value) if name.lower() == _LOCATION else value)
                    for name, value in message.get("headers", [])
                    if not name.lower().startswith(b"access-control-") and name.lower() not in _FORCED_NAMES
                ]
                if not any(name.lower() == _CSP for name, _ in headers):
                    headers.append(_DEFAULT_CSP)
                message = {**message, "headers": headers + _FORCED}
            await send(message)

        refusal = self._refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, send_guarded)
            return
        await self.app(scope, receive, send_guarded)

    def _refusal(self, scope: dict) -> Any:
        """The error response for a request refused before routing, or None."""
        headers = [(name.lower(), value) for name, value in scope.get("headers", [])]
        if self.open_api:
            hosts = [value for name, value in headers if name == b"host"]
            if len(hosts) != 1 or not is_loopback_host(hosts[0].decode("latin-1")):
                return error_response(
                    403,
                    None,
                    "this API has no tokens, so it answers only requests addressed to this machine "
                    "(Host localhost, 127.0.0.1 or [::1]); start `serve --tokens FILE` to serve other names",
                )
        if _cross_site(headers) and not _plain_page(scope):
            return error_response(
                403,
                None,
                "another site started this request: open the page from this site "
                "(asks, searches and changes are never run for another site)",
            )
        if scope["method"] == "POST":
            types = [value for name, value in headers if name == b"content-type"]
            if len(types) != 1 or _media_type(types[0].decode("latin-1")) != "application/json":
                return error_response(415, None, "request bodies must be JSON: send Content-Type: application/json")
        return None
