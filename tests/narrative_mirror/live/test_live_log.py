"""The live log: durable, deduplicated, serialized appends (no embedder, no index)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

from narrative_mirror.live.log import LiveLog, MessageError

ROOT = Path(__file__).resolve().parents[3]


def msg(text: str, author: str = "Ada", ts: str = "2025-03-01T09:00:00Z", **extra) -> dict:
    return {"author": author, "text": text, "timestamp": ts, **extra}


def test_ids_times_and_duplicates(tmp_path):
    log = LiveLog(tmp_path)
    first = log.append(
        "garden", [msg("Beans are up.", id="m1"), msg("Tomatoes too.", "Bo", "2025-03-01T10:30:00+01:00")]
    )
    assert (first.ids, first.duplicates, first.created) == (["m1", "L1"], [], True)
    again = log.append(
        "garden",
        [
            msg("Beans are up.", id="m1"),
            msg("Tomatoes too.", "Bo", "2025-03-01T10:30:00+01:00"),
            msg("changed text, same id", id="m1"),
            msg("New.", ts="2025-03-02T00:00:00"),
        ],
    )
    assert (again.ids, [m.local_id for m in again.stored], again.duplicates) == (
        ["m1", "L1", "m1", "L2"],
        ["L2"],
        ["m1", "L1", "m1"],
    )
    stored = log.messages("garden")
    assert [(m.local_id, m.position, m.timestamp) for m in stored] == [
        ("m1", 0, datetime(2025, 3, 1, 9, 0)),
        ("L1", 1, datetime(2025, 3, 1, 9, 30)),
        ("L2", 2, datetime(2025, 3, 2)),
    ]
    assert stored[1].timestamp_given == "2025-03-01T10:30:00+01:00"
    # a second process (a fresh LiveLog) sees the same messages and the same duplicates
    assert LiveLog(tmp_path).append("garden", [msg("Beans are up.")]).duplicates == ["m1"]
    assert log.chats() == ["garden"]


@pytest.mark.parametrize(
    "batch, field",
    [
        ([], "messages"),
        ([msg("x", ts="yesterday")], "messages[0].timestamp"),
        ([msg("ok"), {"author": "Bo", "text": " ", "timestamp": "2025-01-01T00:00:00Z"}], "messages[1].text"),
        ([msg("x", id="a/b")], "messages[0].id"),
        ([msg("x", id="L7")], "messages[0].id"),
        ([msg("x", color="red")], "messages[0].color"),
    ],
)
def test_a_bad_batch_stores_nothing_and_names_the_field(tmp_path, batch, field):
    log = LiveLog(tmp_path)
    with pytest.raises(MessageError) as refused:
        log.append("garden", batch)
    assert refused.value.field == field
    assert not log.exists("garden")


def test_a_torn_last_line_is_not_a_message_and_is_cut_before_the_next_append(tmp_path):
    log = LiveLog(tmp_path)
    log.append("garden", [msg("one")])
    with open(log.path("garden"), "ab") as handle:
        handle.write(b'{"id": "L1", "position": 1, "author": "Ada", "te')  # a crash mid-write
    assert [m.text for m in LiveLog(tmp_path).messages("garden")] == ["one"]
    LiveLog(tmp_path).append("garden", [msg("two")])
    lines = log.path("garden").read_bytes().splitlines()
    assert [json.loads(line)["text"] for line in lines] == ["one", "two"]


def test_concurrent_writers_lose_and_duplicate_nothing(tmp_path):
    logs = [LiveLog(tmp_path) for _ in range(2)]  # two "processes" (separate states and locks), four threads each

    def write(w: int) -> None:
        for b in range(25):
            batch = [msg(f"writer {w} batch {b} message {i}", id=f"w{w}-b{b}-{i}") for i in range(3)]
            logs[w % 2].append("busy", batch)
            logs[(w + 1) % 2].append("busy", batch[:1])  # a re-send through the other writer

    threads = [threading.Thread(target=write, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stored = LiveLog(tmp_path).messages("busy")
    assert len(stored) == 8 * 25 * 3
    assert len({m.local_id for m in stored}) == len(stored)
    assert [m.position for m in stored] == list(range(len(stored)))


WRITER = """
import sys
from narrative_mirror.live.log import LiveLog
log = LiveLog(sys.argv[1])
for b in range(100000):
    log.append("crash", [{"id": f"b{b}-{i}", "author": "Ada", "text": "x" * 2000 + f"{b}-{i}", "timestamp": "2025-01-01T00:00:00Z"}
                         for i in range(5)])
    print(f"b{b}", flush=True)  # acknowledged
"""


def test_kill_9_loses_no_acknowledged_batch(tmp_path):
    for round_ in range(10):
        child = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        acknowledged = []
        started = time.monotonic()
        while len(acknowledged) < 10 + 3 * round_ and time.monotonic() - started < 60:
            acknowledged.append(child.stdout.readline().strip())
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
        ids = [m.local_id for m in LiveLog(tmp_path).messages("crash")]
        assert len(ids) == len(set(ids))
        assert {f"{b}-{i}" for b in acknowledged for i in range(5)} <= set(ids)
    # the next writer re-sends from the start: nothing stored twice
    log = LiveLog(tmp_path)
    before = len(log.messages("crash"))
    again = log.append("crash", [{"id": "b0-0", "author": "Ada", "text": "x", "timestamp": "2025-01-01T00:00:00Z"}])
    assert again.stored == [] and len(log.messages("crash")) == before


def test_forget_rewrites_the_log_without_the_text_and_positions_are_never_reused(tmp_path):
    writer, other = LiveLog(tmp_path), LiveLog(tmp_path)
    writer.append(
        "diary",
        [msg("first"), msg("secret wombat", ts="2025-03-01T10:00:00Z"), msg("third", ts="2025-03-01T11:00:00Z")],
    )
    assert other.append("diary", [msg("first")]).duplicates == ["L0"]  # the other process has read the log
    with writer.locked("diary"):
        assert [m.text for m in writer.select("diary", ids=["L1"])] == ["secret wombat"]
        assert writer.forget_locked("diary", ["L1"]) == 1
        assert writer.forget_locked("diary", ["L1"]) == 0  # redone: nothing changes
    assert b"wombat" not in writer.path("diary").read_bytes()
    # the other process reads the rewritten file anew: the forgotten message is no duplicate any more,
    # and positions continue after the highest one
    added = other.append("diary", [msg("secret wombat", ts="2025-03-01T10:00:00Z")])
    assert [m.local_id for m in added.stored] == ["L3"]
    assert [(m.local_id, m.position) for m in LiveLog(tmp_path).messages("diary")] == [("L0", 0), ("L2", 2), ("L3", 3)]
