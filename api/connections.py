"""Connection bounds of ``serve``: a client has ``request_timeout_s`` to send a whole request
(head and body) once it connects or starts a request, and ``keep_alive_s`` of silence between
requests; past either, its connection is closed.

uvicorn closes idle keep-alive connections itself but stops that timer at the first byte of a
request, so a client that sends its headers a byte at a time (slowloris) would hold a connection
and its buffers forever. ``bounded_protocol`` adds the request timer to uvicorn's HTTP protocol
(httptools when installed, as uvicorn's own choice, else h11), looking only at what both share:
bytes arriving and the request cycle's ``more_body`` / ``response_complete``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_REQUEST_TIMEOUT_S = 10.0
DEFAULT_KEEP_ALIVE_S = 5


class _RequestTimer:
    """Mixin for a uvicorn HTTP protocol: closes the connection when a request is not wholly read
    ``request_timeout_s`` after the connection opened or the request's first byte arrived."""

    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    closed_slow = 0  # connections closed for a slow request, over all connections (for tests and logs)

    def connection_made(self, transport: asyncio.Transport) -> None:
        self._request_timer: asyncio.TimerHandle | None = None
        super().connection_made(transport)  # type: ignore[misc]
        self._arm()

    def data_received(self, data: bytes) -> None:
        cycle = getattr(self, "cycle", None)
        if self._request_timer is None and (cycle is None or cycle.response_complete):
            self._arm()  # the first bytes of a new request on a kept-alive connection
        super().data_received(data)  # type: ignore[misc]
        cycle = getattr(self, "cycle", None)
        if cycle is not None and not cycle.more_body and not cycle.response_complete:
            self._disarm()  # the whole request is in: the app's time is not the client's

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)  # type: ignore[misc]

    def _arm(self) -> None:
        self._disarm()
        loop = asyncio.get_running_loop()
        self._request_timer = loop.call_later(self.request_timeout_s, self._too_slow)

    def _disarm(self) -> None:
        timer = getattr(self, "_request_timer", None)
        if timer is not None:
            timer.cancel()
            self._request_timer = None

    def _too_slow(self) -> None:
        self._request_timer = None
        transport = self.transport  # type: ignore[attr-defined]
        if not transport.is_closing():
            type(self).closed_slow += 1
            log.info("closed a connection that did not send its request within %g s", self.request_timeout_s)
            transport.close()


def bounded_protocol(request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S) -> type:
    """uvicorn's HTTP protocol class (pass as ``uvicorn.Config(http=...)``) with the request timer."""
    if not (isinstance(request_timeout_s, int | float) and 0 < request_timeout_s < float("inf")):
        raise ValueError(f"request_timeout_s must be a number of seconds > 0, got {request_timeout_s!r}")
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as base
    except ImportError:  # httptools not installed
        from uvicorn.protocols.http.h11_impl import H11Protocol as base
    return type("BoundedHttpProtocol", (_RequestTimer, base), {"request_timeout_s": float(request_timeout_s)})


def server_config(
    app: Any,
    host: str,
    port: int,
    *,
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
    keep_alive_s: int = DEFAULT_KEEP_ALIVE_S,
    **kwargs: Any,
):
    """The ``uvicorn.Config`` of ``serve``: the bounded protocol and the keep-alive timeout."""
    import uvicorn

    if isinstance(keep_alive_s, bool) or not isinstance(keep_alive_s, int) or keep_alive_s < 1:
        raise ValueError(f"keep_alive_s must be an integer >= 1, got {keep_alive_s!r}")
    return uvicorn.Config(
        app, host=host, port=port, http=bounded_protocol(request_timeout_s), timeout_keep_alive=keep_alive_s, **kwargs
    )
