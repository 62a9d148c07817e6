"""The durable spool: every event whose id ``log`` returned is stored exactly once, after a kill -9
of its process (the next ``EventLog`` stores the spool it left), after a write whose spool was not
cleared yet, and after the store and spool folders were deleted under a running log."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

from event_factory import T0, event

from narrative_mirror.events.writer import EventLog

ROOT = Path(__file__).resolve().parents[3]

# Logs 10 events that reach the table but whose spool is never cleared (a crash between the two),
# then 10 more while the store stalls, with a citation, and kills itself: ids printed before.
CRASH = """
import json, os, signal, sys
sys.path.insert(0, "tests")
from datetime import timedelta
from event_factory import T0, event
from narrative_mirror.events.writer import EventLog

log = EventLog(sys.argv[1])
log._spool.commit = lambda offset: None
ids = [log.log(event(f"stored {i}", at=T0 + timedelta(seconds=i))) for i in range(10)]
assert log.flush() and log.events(flush=False).height == 10
log._write_lock.acquire()
ids += [log.log(event(f"in flight {i}", at=T0 + timedelta(minutes=1, seconds=i))) for i in range(10)]
log.mark_cited(ids[-1], ["D1:2"], 0.5)
print(json.dumps(ids), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def wait_until(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_acknowledged_events_survive_kill_9_exactly_once(tmp_path):
    uri = tmp_path / "lancedb"
    proc = subprocess.run(
        [sys.executable, "-c", CRASH, str(uri)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == -9, proc.stderr
    ids = json.loads(proc.stdout)
    assert len(list((tmp_path / "lancedb.spool").glob("*.jsonl"))) == 1  # left behind

    restarted = EventLog(uri)
    stored = restarted.events()
    restarted.close()
    assert sorted(stored["event_id"].to_list()) == sorted(ids)  # each exactly once
    cited = stored.filter(stored["event_id"] == ids[-1]).to_dicts()[0]
    assert (cited["cited_ids"], cited["citation_confidence"]) == (["D1:2"], 0.5)
    assert list((tmp_path / "lancedb.spool").glob("*.jsonl")) == []  # stored and removed


def test_a_living_logs_spool_is_not_taken_by_another(tmp_path):
    first = EventLog(tmp_path / "lancedb")
    with first._write_lock:
        first_id = first.log(event("first"))
        second = EventLog(tmp_path / "lancedb")  # must not store (or remove) the first log's spool
        second_id = second.log(event("second", at=T0 + timedelta(seconds=1)))
        time.sleep(0.3)
        assert first._spool.path.exists()
    assert sorted(first.events()["event_id"].to_list()) == sorted([first_id, second_id])
    first.close()
    second.close()
    assert list((tmp_path / "lancedb.spool").iterdir()) == []  # closed with everything stored: no files


def test_events_recover_when_the_home_is_recreated_under_a_running_log(tmp_path):
    log = EventLog(tmp_path / "home" / "lancedb", spool_dir=tmp_path / "home" / "events")
    before = log.log(event("before"))
    assert log.flush() and log.state().status == "ok"
    shutil.rmtree(tmp_path / "home")
    after = log.log(event("after", at=T0 + timedelta(seconds=1)))
    wait_until(lambda: log.events(flush=False).height == 1)
    assert log.events()["event_id"].to_list() == [after]  # the table was recreated; `before` went with the home
    assert (tmp_path / "home" / "events" / log._spool.path.name).exists()  # the spool too
    assert log.state().status == "ok"
    log.close()
    assert before != after


def test_a_refusing_store_is_failing_state_until_it_accepts_the_kept_events(tmp_path):
    blocked = tmp_path / "lancedb"
    blocked.write_text("not a database")
    log = EventLog(blocked, spool_dir=tmp_path / "spool")
    event_id = log.log(event())
    assert log.flush()
    state = log.state()
    assert (state.status, state.failures, state.unstored) == ("failing", 1, 1)
    assert state.problem().startswith("event log: the store refuses writes since ")
    assert state.problem().endswith("; 1 event(s) kept in the spool until it accepts them")
    blocked.unlink()  # the operator repairs the store: the kept event is stored, no restart
    wait_until(lambda: log.state().status == "ok")
    assert log.events()["event_id"].to_list() == [event_id]
    assert (log.state().failures, log.state().unstored, log.state().problem()) == (1, 0, None)
    log.close()
