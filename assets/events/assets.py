"""Retrieval events as an asset: how well answers use what retrieval returned (the retrieval-events design)."""

import json

import dagster as dg
import polars as pl

from assets.paths import shown_path
from assets.versioning import versioned_asset
from narrative_mirror.storage import frame_hash, write_atomically
from resources.dagster_resources import LanceDBResource, StateResource

STATS_SCHEMA = {
    "method": pl.String,
    "events": pl.Int64,
    "cited_rate": pl.Float64,
    "follow_up_rate": pl.Float64,
    "latency_ms_avg": pl.Float64,
    "latency_ms_p95": pl.Float64,
}


@versioned_asset(group_name="operations", kinds={"lancedb"})
def retrieval_event_stats(
    context: dg.AssetExecutionContext, lancedb: LanceDBResource, state: StateResource
) -> dg.Output[pl.DataFrame]:
    """Per retrieval method: share of returned messages cited, follow-up rate, latency; plus a JSONL
    export of training examples (query, returned, cited, not cited) for ranking optimization."""
    from narrative_mirror.events.analytics import event_stats, export_training_examples, follow_ups_by_query
    from narrative_mirror.events.table import read_events

    events = read_events(lancedb.resolved_uri(), storage_options=lancedb.storage_options())
    stats = event_stats(events) if events.height else {"events": 0, "per_method": {}}
    df = pl.DataFrame(
        [{"method": m, **{k: s.get(k) for k in list(STATS_SCHEMA)[1:]}} for m, s in stats["per_method"].items()],
        schema=STATS_SCHEMA,
    )
    export = state.exports_dir / "retrieval_training_examples.jsonl"
    examples = export_training_examples(events, export) if events.height else 0
    # Queries are what clients typed: they go to a file of the exports folder (a forget redacts
    # it), never into Dagster's metadata, which only counts them.
    followed = follow_ups_by_query(events)
    followed_path = state.exports_dir / "followed_up_queries.jsonl"
    followed_path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(
        followed_path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in followed.to_dicts()).encode()
    )
    floats = {k: dg.MetadataValue.float(float(v)) for k, v in stats.items() if isinstance(v, float)}
    return dg.Output(
        df,
        data_version=dg.DataVersion(frame_hash(df)),
        metadata={
            "events": dg.MetadataValue.int(stats["events"]),
            **floats,
            "training_examples": dg.MetadataValue.int(examples),
            "followed_up_queries": dg.MetadataValue.int(followed.height),
            "followed_up_queries_file": shown_path(followed_path, state.root),
            "export": shown_path(export, state.root),
        },
    )
