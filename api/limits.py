"""Per-client bounds on asks and on searches: each client (its API token; in an open API its
address) may have at most ``running`` requests of a kind at work and ``queued`` more waiting for
one of its slots. Past that a request is refused at once with 429 and ``Retry-After``, so one
client's flood holds a bounded share of the workers and never a queue that others wait behind.
While several clients have work, each gets a fair share of ``running`` (at least one): a flood
gives back its extra slots as its requests finish, and takes them again when it is alone. A client
whose last request ended less than ``linger_s`` ago still counts: one that searches request after
request (a person, a page) would otherwise lose its share in every gap between two of them.

``AskLimits`` / ``SearchLimits`` hold the settings (``serve --ask-running / --ask-queued /
--search-running / --search-queued``); ``ClientLimiter`` hands out the slots of one kind
(asyncio, on the server's event loop: no locks).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from api.requests import ApiError

if TYPE_CHECKING:
    from api.access import TokenEntry

ARRIVAL = "narrative_mirror.arrival"  # ASGI scope key: monotonic time the request arrived (set by the app)


def client_key(who: TokenEntry | None, scope: dict) -> str:
    """Whose ask limits a request counts against: its token's, in an open API its address's."""
    if who is not None:
        return f"token {who.name}"
    client = scope.get("client")
    return f"address {client[0] if client else '?'}"


@dataclass(frozen=True)
class AskLimits:
    """Per client: asks at work at once, asks waiting beyond them, and the ``Retry-After`` (whole
    seconds) of a refused one."""

    running: int = 4
    queued: int = 8
    retry_after_s: int = 1
    linger_s: float = 1.0

    def __post_init__(self) -> None:
        for name, least in (("running", 1), ("queued", 0), ("retry_after_s", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{self.kind} limits: {name} must be an integer >= {least}, got {value!r}")
        if isinstance(self.linger_s, bool) or not isinstance(self.linger_s, int | float) or self.linger_s < 0:
            raise ValueError(f"{self.kind} limits: linger_s must be a number >= 0, got {self.linger_s!r}")

    @property
    def kind(self) -> str:
        return "ask"


@dataclass(frozen=True)
class SearchLimits(AskLimits):
    """Per client: searches at work at once, searches waiting beyond them, and the ``Retry-After``
    of a refused one. Two at work leave the other clients most of the search workers and cores:
    a search is short, so a client that wants more waits in its queue or retries."""

    running: int = 2
    queued: int = 6

    @property
    def kind(self) -> str:
        return "search"


@dataclass
class _Client:
    running: int = 0
    waiters: list[asyncio.Future] = field(default_factory=list)


class ClientLimiter:
    """Slots per client key; ``refused`` counts the 429s given."""

    def __init__(self, limits: AskLimits):
        self.limits = limits
        self._clients: dict[str, _Client] = {}
        self._lingering: dict[str, asyncio.TimerHandle] = {}  # idle clients that still count
        self.refused = 0

    def share(self) -> int:
        """Running slots each client may hold now: all of them for a client alone, a fair part
        (at least one) while several clients have work or had it within ``linger_s``."""
        return max(1, self.limits.running // max(1, len(self._clients) + len(self._lingering)))

    def full(self, key: str) -> bool:
        """True when a request of ``key`` now would be refused (every slot and queue place taken)."""
        client = self._clients.get(key)
        return client is not None and client.running >= self.share() and len(client.waiters) >= self.limits.queued

    def refusal(self) -> ApiError:
        """The 429 of a client past its limits (counted)."""
        self.refused += 1
        return ApiError(
            429,
            None,
            f"too many {self.limits.kind}s at once from this client (at most "
            f"{self.limits.running} at work and {self.limits.queued} waiting); retry later",
            headers={"Retry-After": str(self.limits.retry_after_s)},
        )

    def load(self, key: str) -> tuple[int, int]:
        """(requests at work, requests waiting) of ``key``."""
        client = self._clients.get(key)
        return (client.running, len(client.waiters)) if client else (0, 0)

    @asynccontextmanager
    async def slot(self, key: str, wait_until: float = math.inf) -> AsyncIterator[None]:
        """Holds one of ``key``'s running slots for the block. ``ApiError`` 429 at once when all its
        slots and queue places are taken; the wait for a slot ends at ``wait_until`` (loop time)
        with ``TimeoutError``. A waiter cancelled (its client went away) leaves the queue."""
        if (lingering := self._lingering.pop(key, None)) is not None:
            lingering.cancel()
        client = self._clients.setdefault(key, _Client())
        if client.running >= self.share():
            if len(client.waiters) >= self.limits.queued:
                raise self.refusal()
            waiter = asyncio.get_running_loop().create_future()
            client.waiters.append(waiter)
            try:
                timeout = wait_until - asyncio.get_running_loop().time()
                await asyncio.wait_for(asyncio.shield(waiter), None if timeout == math.inf else max(0.0, timeout))
            except BaseException:
                if waiter in client.waiters:
                    client.waiters.remove(waiter)
                elif waiter.done() and not waiter.cancelled():  # handed a slot just as it gave up: pass it on
                    self._release(key, client)
                self._forget_idle(key, client)
                raise
            # the releasing ask handed its slot over: ``running`` was not decremented for it
        else:
            client.running += 1
        try:
            yield
        finally:
            self._release(key, client)

    def _release(self, key: str, client: _Client) -> None:
        if client.running <= self.share() and self._hand_over(client):
            return  # the slot passes to the longest waiter: ``running`` stays
        client.running -= 1
        self._forget_idle(key, client)

    @staticmethod
    def _hand_over(client: _Client) -> bool:
        while client.waiters:
            waiter = client.waiters.pop(0)
            if not waiter.done():
                waiter.set_result(None)
                return True
        return False

    def _forget_idle(self, key: str, client: _Client) -> None:
        if client.running == 0 and not client.waiters and self._clients.get(key) is client:
            del self._clients[key]
            if self.limits.linger_s > 0:
                loop = asyncio.get_running_loop()
                self._lingering[key] = loop.call_later(self.limits.linger_s, self._stop_lingering, key)
            else:
                self._grow_shares()

    def _stop_lingering(self, key: str) -> None:
        self._lingering.pop(key, None)
        self._grow_shares()

    def _grow_shares(self) -> None:
        """One client fewer: the others' shares grow, so their waiters may start now."""
        share = self.share()
        for other in self._clients.values():
            while other.running < share and self._hand_over(other):
                other.running += 1
