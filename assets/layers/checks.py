"""Data-quality checks of the layers, declared on their assets (blocking: a broken layer stops
what reads it) and yielded by them: every message in exactly one L1 block, no empty L2 thread."""

from __future__ import annotations

from collections import Counter

import dagster as dg
import polars as pl

L1_CHECK_SPECS = [
    dg.AssetCheckSpec(
        "every_message_in_one_block",
        asset="l1_topics",
        blocking=True,
        description="Every message of the chat file is in exactly one L1 block (none left out, none in two).",
    )
]
L2_CHECK_SPECS = [
    dg.AssetCheckSpec(
        "no_empty_thread",
        asset="l2_threads",
        blocking=True,
        description="Every L2 thread holds at least one L1 block, and only blocks that exist.",
    )
]
EXAMPLES = 5  # ids named in a failed check's description


def every_message_in_one_block(messages: pl.DataFrame, blocks: pl.DataFrame) -> dg.AssetCheckResult:
    """Compares the messages' local ids with those listed by the blocks."""
    counts = Counter(i for ids in blocks["message_ids"].to_list() for i in ids)
    local_ids = messages["local_id"].to_list()
    missing = [i for i in local_ids if i not in counts]
    twice = sorted(i for i, n in counts.items() if n > 1)
    unknown = sorted(set(counts) - set(local_ids))
    problems = [
        f"{len(found)} {what}, e.g. {found[:EXAMPLES]}"
        for what, found in (
            ("in no block", missing),
            ("in several blocks", twice),
            ("not messages of the chat", unknown),
        )
        if found
    ]
    return dg.AssetCheckResult(
        check_name="every_message_in_one_block",
        passed=not problems,
        severity=dg.AssetCheckSeverity.ERROR,
        description="; ".join(problems) or f"all {len(local_ids)} messages in exactly one of {blocks.height} blocks",
        metadata={
            "messages": dg.MetadataValue.int(len(local_ids)),
            "in_no_block": dg.MetadataValue.int(len(missing)),
            "in_several_blocks": dg.MetadataValue.int(len(twice)),
        },
    )


def no_empty_thread(threads: pl.DataFrame, blocks: pl.DataFrame) -> dg.AssetCheckResult:
    """Threads without blocks, and threads naming blocks that do not exist."""
    known = set(blocks["block_id"].to_list())
    rows = list(zip(threads["thread_id"].to_list(), threads["block_ids"].to_list()))
    empty = [t for t, ids in rows if not ids]
    dangling = [t for t, ids in rows if any(b not in known for b in ids)]
    problems = [
        f"{len(found)} {what}, e.g. {found[:EXAMPLES]}"
        for what, found in (("threads without blocks", empty), ("threads naming unknown blocks", dangling))
        if found
    ]
    return dg.AssetCheckResult(
        check_name="no_empty_thread",
        passed=not problems,
        severity=dg.AssetCheckSeverity.ERROR,
        description="; ".join(problems) or f"all {len(rows)} threads hold blocks of this chat file",
        metadata={"threads": dg.MetadataValue.int(len(rows)), "empty": dg.MetadataValue.int(len(empty))},
    )
