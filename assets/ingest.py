"""Ingestion layer: messages, gold QA, ARC cases, and the train/test split."""


import dagster as dg
import polars as pl

from assets.config_sources import split_config
from assets.partitions import chat_files
from narrative_mirror import schema, split as split_lib
from narrative_mirror.arcs import arcs_file_for, load_arc_cases
from narrative_mirror.chats import load_chat
from narrative_mirror.gold import gold_qa_frame
from narrative_mirror.storage import frame_hash
from resources import ChatDataResource

UNRESOLVED_WARN_SHARE = 0.05  # more than 5% unresolved gold strings in a file deserves a look


def _versioned(df: pl.DataFrame, metadata: dict) -> dg.Output:
    metadata = {"dagster/row_count": dg.MetadataValue.int(df.height), **metadata}
    return dg.Output(df, data_version=dg.DataVersion(frame_hash(df)), metadata=metadata)


@dg.asset(partitions_def=chat_files, group_name="ingest", code_version="1", kinds={"polars"})
def messages(context: dg.AssetExecutionContext, chat_data: ChatDataResource) -> dg.Output[pl.DataFrame]:
    """One row per message of the chat file (RealTalk or LoCoMo format), in file order."""
    chat = load_chat(chat_data.chat_path(context.partition_key), chat_file=context.partition_key)
    df = chat.messages
    for note in chat.notes:
        context.log.warning(note)
    return _versioned(
        df,
        {
            "format": chat.format,
            "source": dg.MetadataValue.path(str(chat.path)),
            "sessions": dg.MetadataValue.int(df["session"].n_unique()),
            "speakers": ", ".join(chat.speakers),
            "normalizations": dg.MetadataValue.json(chat.notes),
        },
    )


@dg.asset(
    partitions_def=chat_files,
    group_name="ingest",
    code_version="1",
    kinds={"polars"},
    check_specs=[dg.AssetCheckSpec("unresolved_gold_share", asset="gold_qa")],
)
def gold_qa(context: dg.AssetExecutionContext, chat_data: ChatDataResource, messages: pl.DataFrame):
    """Gold questions with evidence ids parsed from the messy annotations (raw kept beside)."""
    chat = load_chat(chat_data.chat_path(context.partition_key), chat_file=context.partition_key)
    df = gold_qa_frame(chat)
    raw_total = int(df["evidence_raw"].list.len().sum() or 0)
    unresolved = df.select(pl.col("unresolved").explode().drop_nulls())["unresolved"].to_list()
    no_gold = int((df["gold_ids"].list.len() == 0).sum()) if df.height else 0
    yield _versioned(
        df,
        {
            "questions": dg.MetadataValue.int(df.height),
            "gold_ids": dg.MetadataValue.int(int(df["gold_ids"].list.len().sum() or 0)),
            "unresolved_evidence": dg.MetadataValue.int(len(unresolved)),
            "unresolved_parts": dg.MetadataValue.json(unresolved),
            "questions_without_gold": dg.MetadataValue.int(no_gold),
        },
    )
    share = len(unresolved) / raw_total if raw_total else 0.0
    yield dg.AssetCheckResult(
        check_name="unresolved_gold_share",
        passed=share <= UNRESOLVED_WARN_SHARE,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "unresolved_share": dg.MetadataValue.float(share),
            "unresolved": dg.MetadataValue.int(len(unresolved)),
            "raw_evidence_strings": dg.MetadataValue.int(raw_total),
        },
        description=f"{len(unresolved)} of {raw_total} gold evidence parts could not be resolved",
    )


@dg.asset(partitions_def=chat_files, group_name="ingest", code_version="1", kinds={"polars"})
def arc_cases(context: dg.AssetExecutionContext, chat_data: ChatDataResource, messages: pl.DataFrame):
    """Narrative arc cases of the chat, validated against its message ids (none is fine)."""
    arcs_dir = chat_data.arcs_path()
    path = arcs_file_for(arcs_dir, context.partition_key) if arcs_dir else None
    if path is None:
        df = schema.empty_frame(schema.ARC_CASES)
        return _versioned(df, {"source": "none (no arcs file for this chat)"})
    df = load_arc_cases(path, messages)
    phases = int(df["phase_names"].list.len().sum() or 0) if df.height else 0
    return _versioned(df, {"source": dg.MetadataValue.path(str(path)), "phases": dg.MetadataValue.int(phases)})


@dg.asset(group_name="ingest", code_version="1", deps=[split_config], kinds={"polars"})
def split(context: dg.AssetExecutionContext) -> dg.Output[pl.DataFrame]:
    """Train/test assignment of every registered chat file (unknown files default to train)."""
    keys = context.instance.get_dynamic_partitions(chat_files.name)
    rows = split_lib.assign_all(keys)
    df = pl.DataFrame(
        {"chat_file": [r.chat_file for r in rows], "split": [r.split for r in rows],
         "configured": [r.configured for r in rows]},
        schema={"chat_file": pl.String, "split": pl.String, "configured": pl.Boolean},
    )
    unknown = [r.chat_file for r in rows if not r.configured]
    if unknown:
        context.log.warning(f"chat files with no split configuration (counted as train): {unknown}")
    return _versioned(
        df,
        {
            "train": dg.MetadataValue.int(sum(r.split == "train" for r in rows)),
            "test": dg.MetadataValue.int(sum(r.split == "test" for r in rows)),
            "unconfigured": dg.MetadataValue.json(unknown),
        },
    )


INGEST_ASSETS = [messages, gold_qa, arc_cases]
