"""Stopping an ask that nobody will read: its client hung up, or its deadline passed.

An ask runs in a worker thread, which cannot be interrupted from outside; it is stopped at its
next step instead. ``StopSignal`` is set by the request (``stop``) or expires at a deadline;
``StoppableRetriever`` hands the agent the real retriever but checks the signal before each call
(every search, block search and message read is one step), raising ``AskStopped`` so the rest of
the ask never runs. ``client_gone`` waits until the client of a request disconnects.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from typing import Any

from starlette.requests import Request


class AskStopped(Exception):
    """The ask was stopped at a step: ``reason`` says why (its client left, its deadline passed)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class StopSignal:
    """Set once, from any thread, by ``stop``; past ``ends`` (time.monotonic) it is set by itself.
    ``steps`` counts the checks that let the ask go on."""

    def __init__(self, ends: float = math.inf, deadline_reason: str = "its deadline passed"):
        self.ends, self._deadline_reason = ends, deadline_reason
        self._reason: str | None = None
        self._lock = threading.Lock()
        self.steps = 0

    def stop(self, reason: str) -> None:
        with self._lock:
            if self._reason is None:
                self._reason = reason

    @property
    def reason(self) -> str | None:
        if self._reason is None and time.monotonic() >= self.ends:
            self.stop(self._deadline_reason)
        return self._reason

    def check(self) -> None:
        """``AskStopped`` once the signal is set; else the ask may take its next step."""
        reason = self.reason
        if reason is not None:
            raise AskStopped(reason)
        self.steps += 1


class StoppableRetriever:
    """The retriever as one ask sees it: every method call first checks ``signal``; attributes
    (``embedder``, ``default_variant``, ...) are the retriever's own."""

    def __init__(self, retriever: Any, signal: StopSignal):
        self._retriever, self._signal = retriever, signal

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._retriever, name)
        if not callable(value):
            return value

        def checked(*args: Any, **kwargs: Any) -> Any:
            self._signal.check()
            return value(*args, **kwargs)

        return checked


async def client_gone(request: Request) -> None:
    """Returns when the request's client disconnects (call it after the body was read: the server
    then answers ``receive`` only with ``http.disconnect``, on hang-up or once the response is sent)."""
    try:
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                return
    except Exception:  # noqa: BLE001 - a server that cannot tell: the client counts as connected
        await asyncio.Event().wait()
