"""Data-quality check of the index, declared on lancedb_index and yielded by it: every message
the index is meant to hold (``index_rows.indexed_messages``: system lines are not) has a row with a
whole vector (none missing, none empty or not finite)."""

from __future__ import annotations

import dagster as dg
import numpy as np
import pyarrow as pa

INDEX_CHECK_SPECS = [
    dg.AssetCheckSpec(
        "vectors_for_every_message",
        asset="lancedb_index",
        blocking=True,
        description="Every indexed message of the chat file (all but system lines) has a row in the LanceDB "
        "messages table with a finite vector of the embedder's dimension.",
    )
]
EXAMPLES = 5


def vectors_for_every_message(message_ids: list[str], rows: pa.Table) -> dg.AssetCheckResult:
    """``message_ids``: the ids of the chat's indexed messages (``index_rows.indexed_messages``);
    ``rows``: the messages table rows written for the chat (``message_id``, ``vector``)."""
    written = rows.column("message_id").to_pylist()
    vectors = rows.column("vector").to_pylist()
    dimension = max((len(v) for v in vectors if v), default=0)
    bad = [m for m, v in zip(written, vectors) if not v or len(v) != dimension or not np.isfinite(v).all()]
    missing = sorted(set(message_ids) - set(written))
    problems = [
        f"{len(found)} {what}, e.g. {found[:EXAMPLES]}"
        for what, found in (
            ("messages without a row", missing),
            ("rows with an empty, short or non-finite vector", bad),
        )
        if found
    ]
    return dg.AssetCheckResult(
        check_name="vectors_for_every_message",
        passed=not problems,
        severity=dg.AssetCheckSeverity.ERROR,
        description="; ".join(problems) or f"all {len(message_ids)} messages indexed with {dimension}-d vectors",
        metadata={
            "messages": dg.MetadataValue.int(len(message_ids)),
            "rows": dg.MetadataValue.int(len(written)),
            "missing": dg.MetadataValue.int(len(missing)),
            "bad_vectors": dg.MetadataValue.int(len(bad)),
        },
    )
