"""The LLM bulkhead: a bounded pool for LLM-calling ask work, each ask's deadline, and the rule
that exactly one retrieval event is logged per ask (the answer returned; a late LLM answer's
event is dropped).

``LLMPool`` refuses work instead of queueing beyond its slots. ``OneAnswer`` decides once which
path answers (the LLM's or the offline one) and hands each path the event log it must use.
``check_deadlines`` gives
each profile's deadline with the configured overrides.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from narrative_mirror.agent.profiles import profiles

if TYPE_CHECKING:
    from narrative_mirror.events.record import RetrievalEvent
    from narrative_mirror.events.writer import EventLog

log = logging.getLogger(__name__)


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


class OneAnswer:
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

    def __init__(self, one: OneAnswer):
        self.one = one

    def log(self, event: RetrievalEvent) -> str:
        if self.one.take("llm"):
            return self.one.commit(event)
        log.info("ask: LLM answer arrived after the deadline; dropped (event %s not logged)", event.event_id)
        return event.event_id


class _KeepLog:
    """The event log of the speculative offline answer: keeps its event for ``OneAnswer.commit``."""

    def __init__(self, one: OneAnswer):
        self.one = one

    def log(self, event: RetrievalEvent) -> str:
        self.one.deferred = event
        return event.event_id


def discard(future: asyncio.Future) -> None:
    """Consume the outcome of work whose answer is no longer wanted (no 'never retrieved' warning)."""
    if not future.cancelled() and future.exception() is not None:
        log.info("ask: abandoned work ended with %s", type(future.exception()).__name__)


def check_deadlines(deadlines: Mapping[str, float] | None) -> dict[str, float]:
    """Every profile's ask deadline in seconds: its ``deadline_s``, or the override in ``deadlines``."""
    known = profiles()
    merged = {name: profile.deadline_s for name, profile in known.items()}
    for name, seconds in (deadlines or {}).items():
        if name not in known:
            raise ValueError(f"deadlines: unknown profile {name!r}; known: {sorted(known)}")
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not (math.isfinite(seconds) and seconds > 0)
        ):
            raise ValueError(f"deadlines[{name!r}] must be a number of seconds > 0, got {seconds!r}")
        merged[name] = float(seconds)
    return merged
