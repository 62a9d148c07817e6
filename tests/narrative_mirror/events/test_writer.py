from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta, timezone

import pytest
from event_factory import T0, event

from narrative_mirror.events.writer import EventLog


def test_logged_event_is_stored_with_every_field(events_log):
    at = datetime(2026, 1, 5, 13, 30, tzinfo=timezone(timedelta(hours=1)))  # 12:30 UTC
    event_id = events_log.log(
        event(
            "rye bread",
            user="ana",
            at=at,
            session_id="s1",
            threshold=0.75,
            counts_per_source={"bm25": 2, "dense": 1},
            latency_ms=12.5,
            tokens_in_context=40,
        )
    )
    rows = events_log.events().to_dicts()
    assert len(rows) == 1
    row = rows[0]
    assert row["event_id"] == event_id
    assert (row["user_id"], row["session_id"], row["chat_file"], row["query"]) == ("ana", "s1", "chat_a", "rye bread")
    assert row["returned_ids"] == ["D1:1", "D1:2"]
    assert (row["method"], row["threshold"]) == ("hybrid", 0.75)
    assert json.loads(row["counts_per_source"]) == {"bm25": 2, "dense": 1}
    assert (row["cited_ids"], row["citation_confidence"]) == ([], None)
    assert (row["follow_up_of"], row["satisfied"]) == (None, None)
    assert (row["latency_ms"], row["tokens_in_context"]) == (12.5, 40)
    assert row["created_at"] == datetime(2026, 1, 5, 12, 30, tzinfo=UTC)
    assert events_log.failures == 0


def test_mark_cited_in_the_same_batch_and_after_the_write(events_log):
    first = events_log.log(event())
    events_log.mark_cited(first, ["D1:2"], 0.5)  # very likely still queued with its event
    events_log.flush()
    second = events_log.log(event("rye", at=T0 + timedelta(seconds=1)))
    events_log.flush()
    events_log.mark_cited(second, ["D1:1", "D7:7"], 1.0)  # an update of a stored row
    rows = {r["event_id"]: r for r in events_log.events().to_dicts()}
    assert (rows[first]["cited_ids"], rows[first]["citation_confidence"]) == (["D1:2"], 0.5)
    assert (rows[second]["cited_ids"], rows[second]["citation_confidence"]) == (["D1:1", "D7:7"], 1.0)
    assert events_log.failures == 0


def test_citations_of_an_unknown_event_count_as_a_failure(events_log):
    events_log.log(event())
    events_log.mark_cited("no-such-event", ["D1:1"], 1.0)
    events_log.flush()
    assert events_log.failures == 1
    assert events_log.events().height == 1


def test_fifty_threads_lose_no_rows(events_log):
    ids: list[str] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        event_id = events_log.log(event(f"query {i}", user=f"user{i % 7}", at=T0 + timedelta(milliseconds=i)))
        with lock:
            ids.append(event_id)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stored = events_log.events()
    assert stored.height == 50
    assert sorted(stored["event_id"].to_list()) == sorted(ids)
    assert sorted(stored["query"].to_list()) == sorted(f"query {i}" for i in range(50))
    assert events_log.failures == 0


def test_logging_never_waits_for_a_stalled_writer_and_loses_nothing(tmp_path):
    log = EventLog(tmp_path / "lancedb")
    with log._write_lock:  # the writer takes the first event, then stalls on the store
        started = time.monotonic()
        for i in range(300):  # more than a batch: nothing is dropped while the store is slow
            log.log(event(f"q{i:03d}", at=T0 + timedelta(seconds=i)))
        assert time.monotonic() - started < 10.0
        assert log.failures == 0
    assert log.events()["query"].to_list() == [f"q{i:03d}" for i in range(300)]
    log.close()


def test_a_broken_store_counts_failures_and_never_raises(tmp_path, embedder):
    not_a_folder = tmp_path / "events_file"
    not_a_folder.write_text("not a database")
    log = EventLog(not_a_folder, embedder=embedder)
    event_id = log.log(event())
    assert isinstance(event_id, str)
    assert log.flush()
    assert log.failures == 1
    log.close()
    log.log(event("after close"))
    assert log.failures == 2


def test_prune_applies_the_retention(tmp_path):
    now = datetime.now(UTC)
    log = EventLog(tmp_path / "lancedb", retention_days=90)
    log.log(event("old", at=now - timedelta(days=91)))
    log.log(event("recent", at=now - timedelta(days=89)))
    assert log.prune() == 1
    assert log.events()["query"].to_list() == ["recent"]
    log.close()
    keep_all = EventLog(tmp_path / "lancedb", retention_days=None)
    assert keep_all.prune() == 0
    keep_all.close()


def test_bad_retention_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="retention_days"):
        EventLog(tmp_path / "x", retention_days=0)
