from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta, timezone

import polars as pl
import pytest

from narrative_mirror.events import (
    EVENT_SCHEMA,
    EventLog,
    RetrievalEvent,
    approx_tokens,
    event_stats,
    export_training_examples,
    read_events,
)

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def event(query: str = "Where does Ana work?", user: str = "u1", at: datetime = T0, **fields) -> RetrievalEvent:
    defaults = {"chat_file": "chat_a", "returned_ids": ["D1:1", "D1:2"], "method": "hybrid"}
    return RetrievalEvent(user_id=user, query=query, created_at=at, **{**defaults, **fields})


@pytest.fixture
def events_log(tmp_path):
    log = EventLog(tmp_path / "lancedb")
    yield log
    log.close()


@pytest.fixture
def follow_log(tmp_path, embedder):
    log = EventLog(tmp_path / "lancedb", embedder=embedder)
    yield log
    log.close()


def test_logged_event_is_stored_with_every_field(events_log):
    at = datetime(2026, 1, 5, 13, 30, tzinfo=timezone(timedelta(hours=1)))  # 12:30 UTC
    event_id = events_log.log(event(
        "rye bread", user="ana", at=at, session_id="s1", threshold=0.75,
        counts_per_source={"bm25": 2, "dense": 1}, latency_ms=12.5, tokens_in_context=40))
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


def test_logging_never_waits_for_a_stalled_writer(tmp_path):
    log = EventLog(tmp_path / "lancedb", max_pending=1)
    with log._write_lock:  # the writer takes the first event, then stalls on the store
        log.log(event("a"))
        deadline = time.monotonic() + 10
        while log._queue.qsize() and time.monotonic() < deadline:
            time.sleep(0.01)
        started = time.monotonic()
        log.log(event("b", at=T0 + timedelta(seconds=1)))  # fills the queue
        log.log(event("c", at=T0 + timedelta(seconds=2)))  # no room: dropped and counted
        assert time.monotonic() - started < 1.0
        assert log.failures == 1
    assert log.events()["query"].to_list() == ["a", "b"]
    log.close()


def test_filters_quote_their_values(events_log):
    events_log.log(event(user="o'brien", chat_file="chat_b"))
    events_log.log(event(user="ana", at=T0 + timedelta(hours=1)))
    assert events_log.events(user_id="o'brien")["chat_file"].to_list() == ["chat_b"]
    assert events_log.events(chat_file="chat_a")["user_id"].to_list() == ["ana"]
    assert events_log.events(since=T0 + timedelta(minutes=30))["user_id"].to_list() == ["ana"]
    assert events_log.events(until=T0 + timedelta(minutes=30))["user_id"].to_list() == ["o'brien"]


def test_a_similar_query_of_the_same_user_is_a_follow_up(follow_log):
    first = follow_log.log(event("Where does Ana work?", user="u1"))
    other_user = follow_log.log(event("Where does Ana work?", user="u2", at=T0 + timedelta(minutes=1)))
    unrelated = follow_log.log(event("How far did Ben run on Sunday?", user="u1", at=T0 + timedelta(minutes=2)))
    retry = follow_log.log(event("Where is Ana working?", user="u1", at=T0 + timedelta(minutes=3)))
    rows = {r["event_id"]: r for r in follow_log.events().to_dicts()}
    # The retry follows up the similar earlier query, skipping the unrelated one in between.
    assert rows[retry]["follow_up_of"] == first
    assert rows[first]["satisfied"] is False
    assert rows[other_user]["follow_up_of"] is None and rows[other_user]["satisfied"] is None
    assert rows[unrelated]["follow_up_of"] is None and rows[unrelated]["satisfied"] is None
    assert rows[retry]["satisfied"] is None


def test_a_follow_up_must_fall_inside_the_window(follow_log):
    first = follow_log.log(event("Where does Ana work?"))
    follow_log.flush()  # the earlier event is stored: marking it is an update
    late = follow_log.log(event("Where is Ana working?", at=T0 + timedelta(minutes=11)))
    retry = follow_log.log(event("Where does Ana work now?", at=T0 + timedelta(minutes=15)))
    rows = {r["event_id"]: r for r in follow_log.events().to_dicts()}
    assert rows[late]["follow_up_of"] is None
    assert rows[retry]["follow_up_of"] == late
    assert rows[late]["satisfied"] is False
    assert rows[first]["satisfied"] is None


def test_follow_ups_link_across_event_logs(tmp_path, embedder):
    # One CLI run per question: the second process finds the first query in the table.
    first_log = EventLog(tmp_path / "lancedb", embedder=embedder)
    first = first_log.log(event("Where does Ana work?"))
    first_log.close()
    second_log = EventLog(tmp_path / "lancedb", embedder=embedder)
    retry = second_log.log(event("Where is Ana working?", at=T0 + timedelta(minutes=2)))
    rows = {r["event_id"]: r for r in second_log.events().to_dicts()}
    second_log.close()
    assert rows[retry]["follow_up_of"] == first
    assert rows[first]["satisfied"] is False


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


def test_events_of_an_empty_log_have_the_schema(events_log, tmp_path):
    frame = events_log.events()
    assert frame.height == 0
    assert frame.columns == EVENT_SCHEMA.names
    assert read_events(tmp_path / "nothing_here").columns == EVENT_SCHEMA.names


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"method": "magic"}, "method 'magic'"),
        ({"created_at": datetime(2026, 1, 1)}, "created_at must be a timezone-aware"),
        ({"user_id": ""}, "user_id"),
        ({"returned_ids": ["D1:1", 3]}, "returned_ids"),
        ({"citation_confidence": 1.5}, "citation_confidence"),
        ({"latency_ms": -1}, "latency_ms"),
        ({"counts_per_source": {"bm25": -1}}, "counts_per_source"),
    ],
)
def test_invalid_events_are_rejected_naming_the_field(fields, message):
    defaults = {"user_id": "u", "chat_file": "c", "query": "q", "returned_ids": [], "method": "hybrid"}
    with pytest.raises(ValueError, match=message):
        RetrievalEvent(**{**defaults, **fields})


def test_bad_retention_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="retention_days"):
        EventLog(tmp_path / "x", retention_days=0)


def test_approx_tokens():
    assert approx_tokens(["abcd", "abcde", ""]) == 1 + 2 + 0


def stats_frame() -> pl.DataFrame:
    rows = [
        # method, returned, cited, confidence, satisfied, latency
        ("hybrid", ["a", "b", "c", "d"], ["a", "x"], 1.0, False, 10.0),
        ("hybrid", ["e", "f"], ["e", "f"], 0.5, None, 20.0),
        ("hybrid", ["g"], [], None, None, 30.0),  # citations unknown: not in the cited share
        ("tree", ["h", "i"], [], 1.0, False, 40.0),
    ]
    return pl.DataFrame(
        [{"event_id": f"e{i}", "chat_file": "c", "query": f"q{i}", "method": m, "returned_ids": r, "cited_ids": c,
          "citation_confidence": conf, "satisfied": s, "latency_ms": lat}
         for i, (m, r, c, conf, s, lat) in enumerate(rows)],
        schema={"event_id": pl.String, "chat_file": pl.String, "query": pl.String, "method": pl.String,
                "returned_ids": pl.List(pl.String), "cited_ids": pl.List(pl.String),
                "citation_confidence": pl.Float64, "satisfied": pl.Boolean, "latency_ms": pl.Float64},
    )


def test_event_stats_exact_values():
    stats = event_stats(stats_frame())
    assert stats["events"] == 4
    assert stats["events_with_citations"] == 3
    assert (stats["returned"], stats["cited"], stats["cited_not_returned"]) == (8, 3, 1)
    assert stats["cited_rate"] == pytest.approx(3 / 8)
    assert stats["follow_up_rate"] == pytest.approx(2 / 4)
    assert stats["latency_ms_avg"] == pytest.approx(25.0)
    assert stats["latency_ms_p95"] == pytest.approx(30.0 + 0.85 * 10.0)  # linear, rank 2.85 of 0..3
    hybrid, tree = stats["per_method"]["hybrid"], stats["per_method"]["tree"]
    assert (hybrid["events"], hybrid["returned"], hybrid["cited"]) == (3, 6, 3)
    assert hybrid["cited_rate"] == pytest.approx(0.5)
    assert hybrid["follow_up_rate"] == pytest.approx(1 / 3)
    assert (tree["cited_rate"], tree["follow_up_rate"], tree["latency_ms_p95"]) == (0.0, 1.0, 40.0)


def test_event_stats_of_no_events():
    stats = event_stats(stats_frame().head(0))
    assert stats["events"] == 0
    assert stats["cited_rate"] is None and stats["follow_up_rate"] is None and stats["latency_ms_p95"] is None
    assert stats["per_method"] == {}


def test_event_stats_names_missing_columns():
    with pytest.raises(ValueError, match="latency_ms"):
        event_stats(stats_frame().drop("latency_ms"))


def test_export_training_examples(tmp_path):
    path = tmp_path / "out" / "examples.jsonl"
    assert export_training_examples(stats_frame(), path) == 3
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0] == {"event_id": "e0", "chat_file": "c", "query": "q0", "returned": ["a", "b", "c", "d"],
                        "cited": ["a"], "not_cited": ["b", "c", "d"], "citation_confidence": 1.0, "satisfied": False,
                        "follow_up_of": None}
    assert [(x["cited"], x["not_cited"]) for x in lines[1:]] == [(["e", "f"], []), ([], ["h", "i"])]
    assert [p.name for p in path.parent.iterdir()] == ["examples.jsonl"]


def test_stats_and_export_over_a_real_log(events_log, tmp_path):
    first = events_log.log(event(returned_ids=["D1:1", "D1:2"], latency_ms=10.0))
    events_log.log(event("rye", at=T0 + timedelta(seconds=1), method="keyword", latency_ms=30.0))
    events_log.mark_cited(first, ["D1:2"], 1.0)
    frame = events_log.events()
    assert read_events(events_log.uri).equals(frame)  # the read-only path analysis jobs use
    stats = event_stats(frame)
    assert (stats["events"], stats["cited_rate"], stats["latency_ms_avg"]) == (2, 0.5, 20.0)
    assert sorted(stats["per_method"]) == ["hybrid", "keyword"]
    assert export_training_examples(frame, tmp_path / "ex.jsonl") == 1
