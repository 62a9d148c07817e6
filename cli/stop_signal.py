"""Remembers that the process was told to stop (SIGINT, SIGTERM), whichever Python handler took it.

Dagster swaps the handlers during a run: an interrupt that arrives while a run captures them but
runs no step (after its last step) is dropped when the run ends, and one raised inside a garbage
collector callback during a step is printed as "Exception ignored" and lost. Either way the run
finishes and, without this, the command would go on to the next chat file and exit 0. The
interpreter writes the number of every signal it handles to the wakeup file descriptor before any
Python handler runs, so reading it after a run tells whether a stop was asked for.
"""

from __future__ import annotations

import signal
import socket

STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


class InterruptWatch:
    """Whether SIGINT/SIGTERM arrived (an ask's stop is ``api.stopping.StopSignal``). Installed on the main thread only (``signal.set_wakeup_fd`` allows no other)."""

    def __init__(self) -> None:
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)
        self._previous = signal.set_wakeup_fd(self._writer.fileno(), warn_on_full_buffer=False)
        self._received = False

    def received(self) -> bool:
        """Whether SIGINT or SIGTERM arrived since this was installed (it stays true)."""
        while not self._received:
            try:
                numbers = self._reader.recv(512)
            except BlockingIOError:
                break
            if not numbers:
                break
            self._received = any(n in STOP_SIGNALS for n in numbers)
        return self._received

    def close(self) -> None:
        if self._writer is None:
            return
        current = signal.set_wakeup_fd(self._previous)
        if current != self._writer.fileno():  # someone (an asyncio loop) installed its own since: keep it
            signal.set_wakeup_fd(current)
        self._reader.close()
        self._writer.close()
        self._writer = None
