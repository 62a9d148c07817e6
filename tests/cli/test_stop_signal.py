"""A stop asked for while another handler swallows it is still seen (cli/stop_signal.py)."""

import os
import signal
import time

import pytest

from cli.stop_signal import InterruptWatch


@pytest.fixture
def swallowed():
    """Dagster's handler while a run captures interrupts: it takes the signal and drops it."""
    before = {s: signal.signal(s, lambda *_: None) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)}
    yield
    for s, handler in before.items():
        signal.signal(s, handler)


def _deliver(signum: int) -> None:
    os.kill(os.getpid(), signum)
    time.sleep(0.05)  # the interpreter runs handlers between bytecodes


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_swallowed_stop_signal_is_received(swallowed, signum):
    stop = InterruptWatch()
    try:
        assert not stop.received()
        _deliver(signum)
        assert stop.received()
        assert stop.received()  # it stays asked for
    finally:
        stop.close()


def test_other_signals_are_not_a_stop_and_close_restores_the_previous_wakeup_fd(swallowed):
    before = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(before)
    stop = InterruptWatch()
    _deliver(signal.SIGUSR1)
    assert not stop.received()
    stop.close()
    assert signal.set_wakeup_fd(before) == before
