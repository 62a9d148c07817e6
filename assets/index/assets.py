"""The LanceDB index of each chat file: its messages, blocks and threads with their vectors and
full-text index, what questions are answered from."""

import dagster as dg
import polars as pl

from assets.freshness import PARTITION_AUTOMATION
from assets.index.checks import INDEX_CHECK_SPECS, vectors_for_every_message
from assets.partitions import chat_files
from assets.versioning import versioned_asset
from narrative_mirror.storage import frame_hash
from resources.dagster_resources import LanceDBResource


@versioned_asset(
    partitions_def=chat_files,
    group_name="index",
    kinds={"lancedb"},
    automation_condition=PARTITION_AUTOMATION,
    check_specs=INDEX_CHECK_SPECS,
)
def lancedb_index(
    context: dg.AssetExecutionContext,
    messages: pl.DataFrame,
    message_embeddings: pl.DataFrame,
    l1_topics: pl.DataFrame,
    l15_signals: pl.DataFrame,
    l2_threads: pl.DataFrame,
    lancedb: LanceDBResource,
):
    """Messages, blocks and threads of the chat in LanceDB (vectors + full-text index),
    replacing the chat's previous rows in one commit per table."""
    from narrative_mirror.index_rows import build_rows, indexed_messages

    store = lancedb.get()
    key = context.partition_key
    rows = build_rows(messages, message_embeddings, signals=l15_signals, blocks=l1_topics, threads=l2_threads)
    versions = {table: store.replace_partition(table, key, table_rows) for table, table_rows in rows.items()}
    content = frame_hash(pl.DataFrame({"h": [frame_hash(pl.from_arrow(t)) for t in rows.values()]}))
    yield dg.MaterializeResult(
        data_version=dg.DataVersion(content),
        metadata={
            "uri": lancedb.resolved_uri(),
            **{f"{t}_rows": dg.MetadataValue.int(r.num_rows) for t, r in rows.items()},
            **{f"{t}_version": dg.MetadataValue.int(v) for t, v in versions.items()},
        },
    )
    yield vectors_for_every_message(indexed_messages(messages)["message_id"].to_list(), rows["messages"])


INDEX_ASSETS = [lancedb_index]
