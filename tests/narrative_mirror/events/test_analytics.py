from __future__ import annotations

import json
from datetime import timedelta

import polars as pl
import pytest
from event_factory import T0, event

from narrative_mirror.events.analytics import event_stats, export_training_examples
from narrative_mirror.events.table import read_events


def stats_frame() -> pl.DataFrame:
    rows = [
        # method, returned, cited, confidence, satisfied, latency
        ("hybrid", ["a", "b", "c", "d"], ["a", "x"], 1.0, False, 10.0),
        ("hybrid", ["e", "f"], ["e", "f"], 0.5, None, 20.0),
        ("hybrid", ["g"], [], None, None, 30.0),  # citations unknown: not in the cited share
        ("tree", ["h", "i"], [], 1.0, False, 40.0),
    ]
    return pl.DataFrame(
        [
            {
                "event_id": f"e{i}",
                "chat_file": "c",
                "query": f"q{i}",
                "method": m,
                "returned_ids": r,
                "cited_ids": c,
                "citation_confidence": conf,
                "satisfied": s,
                "latency_ms": lat,
            }
            for i, (m, r, c, conf, s, lat) in enumerate(rows)
        ],
        schema={
            "event_id": pl.String,
            "chat_file": pl.String,
            "query": pl.String,
            "method": pl.String,
            "returned_ids": pl.List(pl.String),
            "cited_ids": pl.List(pl.String),
            "citation_confidence": pl.Float64,
            "satisfied": pl.Boolean,
            "latency_ms": pl.Float64,
        },
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
    assert lines[0] == {
        "event_id": "e0",
        "chat_file": "c",
        "query": "q0",
        "returned": ["a", "b", "c", "d"],
        "cited": ["a"],
        "not_cited": ["b", "c", "d"],
        "citation_confidence": 1.0,
        "cited_confidence": {},
        "satisfied": False,
        "follow_up_of": None,
    }
    assert [(x["cited"], x["not_cited"]) for x in lines[1:]] == [(["e", "f"], []), ([], ["h", "i"])]
    assert [p.name for p in path.parent.iterdir()] == ["examples.jsonl"]


def test_stats_and_export_over_a_real_log(events_log, tmp_path):
    first = events_log.log(event(returned_ids=["D1:1", "D1:2"], latency_ms=10.0))
    events_log.log(event("rye", at=T0 + timedelta(seconds=1), method="keyword", latency_ms=30.0))
    events_log.mark_cited(first, ["D1:2"], per_id=[0.35])
    frame = events_log.events()
    assert read_events(events_log.uri).equals(frame)  # the read-only path analysis jobs use
    stats = event_stats(frame)
    assert (stats["events"], stats["cited_rate"], stats["latency_ms_avg"]) == (2, 0.5, 20.0)
    assert sorted(stats["per_method"]) == ["hybrid", "keyword"]
    assert export_training_examples(frame, tmp_path / "ex.jsonl") == 1
    exported = json.loads((tmp_path / "ex.jsonl").read_text())
    # the graded values reach the training data, per cited id and as the event's mean
    assert (exported["citation_confidence"], exported["cited_confidence"]) == (0.35, {"D1:2": 0.35})
