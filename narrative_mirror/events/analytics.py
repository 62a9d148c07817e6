"""Analysis of stored events (``read_events`` / ``EventLog.events()`` frames): the seed-001 success
statistics, the most followed-up queries, and training examples as JSON lines.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import polars as pl


def _cited_counts(events: pl.DataFrame) -> pl.DataFrame:
    """Per event with known citations: returned, cited-and-returned and cited-not-returned counts."""
    known = events.filter(pl.col("citation_confidence").is_not_null())
    return known.select(
        pl.col("returned_ids").list.len().alias("returned"),
        pl.col("cited_ids").list.set_intersection("returned_ids").list.len().alias("cited"),
        pl.col("cited_ids").list.set_difference("returned_ids").list.len().alias("missed"),
    )


def _stats(events: pl.DataFrame) -> dict:
    n = events.height
    counts = _cited_counts(events)
    returned = int(counts["returned"].sum()) if counts.height else 0
    latency = events["latency_ms"].to_numpy()
    return {
        "events": n,
        "events_with_citations": counts.height,
        "returned": returned,
        "cited": int(counts["cited"].sum()) if counts.height else 0,
        "cited_not_returned": int(counts["missed"].sum()) if counts.height else 0,
        # share of returned messages the answers cited (events with known citations only)
        "cited_rate": (int(counts["cited"].sum()) / returned) if returned else None,
        # share of events the same user followed up with a similar query
        "follow_up_rate": (int(events["satisfied"].eq(False).sum()) / n) if n else None,
        "latency_ms_avg": float(latency.mean()) if n else None,
        "latency_ms_p95": float(np.percentile(latency, 95)) if n else None,  # linear interpolation
    }


def event_stats(events: pl.DataFrame) -> dict:
    """Seed-001 success queries over ``EventLog.events()``: cited share of returned messages,
    follow-up rate, average and p95 latency, overall and under ``per_method``."""
    missing = [
        c
        for c in ("returned_ids", "cited_ids", "citation_confidence", "satisfied", "latency_ms", "method")
        if c not in events.columns
    ]
    if missing:
        raise ValueError(f"event_stats: events frame lacks columns {missing}")
    per_method = {
        method: _stats(events.filter(pl.col("method") == method))
        for method in sorted(events["method"].unique().to_list())
    }
    return {**_stats(events), "per_method": per_method}


def follow_ups_by_query(events: pl.DataFrame, limit: int = 20) -> pl.DataFrame:
    """Per query: how often it was asked and how often the same user asked again right after
    (a follow-up: the answer did not settle it), most followed-up first."""
    if not events.height:
        return pl.DataFrame(schema={"query": pl.String, "asked": pl.UInt32, "followed_up": pl.UInt32})
    return (
        events.group_by("query")
        .agg(pl.len().alias("asked"), pl.col("satisfied").eq(False).sum().cast(pl.UInt32).alias("followed_up"))
        .filter(pl.col("followed_up") > 0)
        .sort(["followed_up", "asked", "query"], descending=[True, True, False])
        .head(limit)
    )


def export_training_examples(events: pl.DataFrame, path: str | Path) -> int:
    """Write one JSON line per event with known citations:
    {event_id, chat_file, query, returned, cited, not_cited, citation_confidence, cited_confidence,
    satisfied, follow_up_of}; ``cited`` / ``not_cited`` split the returned ids (returned order);
    ``cited_confidence``: cited id -> its graded confidence (empty when the event has none per id).
    Returns the number of lines."""
    missing = [
        c
        for c in ("event_id", "chat_file", "query", "returned_ids", "cited_ids", "citation_confidence", "satisfied")
        if c not in events.columns
    ]
    if missing:
        raise ValueError(f"export_training_examples: events frame lacks columns {missing}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    known = events.filter(pl.col("citation_confidence").is_not_null())
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as out:
        for row in known.iter_rows(named=True):
            cited = set(row["cited_ids"])
            out.write(
                json.dumps(
                    {
                        "event_id": row["event_id"],
                        "chat_file": row["chat_file"],
                        "query": row["query"],
                        "returned": row["returned_ids"],
                        "cited": [i for i in row["returned_ids"] if i in cited],
                        "not_cited": [i for i in row["returned_ids"] if i not in cited],
                        "citation_confidence": row["citation_confidence"],
                        "cited_confidence": dict(zip(row["cited_ids"], row.get("cited_confidences") or [])),
                        "satisfied": row["satisfied"],
                        "follow_up_of": row.get("follow_up_of"),
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
    os.replace(tmp, path)  # readers never see a half-written file
    return known.height
