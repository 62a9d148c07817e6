"""Ingestion layer: messages, gold QA, ARC cases, and the train/test split."""

from contextlib import contextmanager

import dagster as dg
import polars as pl

from assets.freshness import PARTITION_AUTOMATION
from assets.ingest.checks import GOLD_QA_CHECKS, gold_oddities_check, unresolved_gold_share_check
from assets.partitions import chat_files
from assets.paths import shown_path
from assets.sources.assets import arc_file, chat_file, split_config
from assets.versioning import versioned_asset, versioned_output
from narrative_mirror import schema
from narrative_mirror import split as split_lib
from narrative_mirror.arcs import ArcCaseError, arcs_file_for, load_arc_cases
from narrative_mirror.chats import ChatFormatError, load_chat
from narrative_mirror.exports.folder import NATIVE
from narrative_mirror.gold import gold_qa_frame
from resources.dagster_resources import ChatDataResource

# Marks a failure caused by a bad input file (the command line exits 2 for those, 1 for the rest).
INPUT_PROBLEM = "narrative_mirror/input_problem"


@contextmanager
def input_problems_as_failures():
    """A bad chat or ARC file fails its step with one line naming the file and the field, and no
    traceback: the code is fine, the file needs fixing."""
    try:
        yield
    except (ChatFormatError, ArcCaseError) as exc:
        raise dg.Failure(
            description=" ".join(str(exc).split()), metadata={INPUT_PROBLEM: True}, allow_retries=False
        ) from None


@versioned_asset(
    partitions_def=chat_files,
    group_name="ingest",
    kinds={"polars"},
    deps=[chat_file],
    automation_condition=PARTITION_AUTOMATION,
)
def messages(context: dg.AssetExecutionContext, chat_data: ChatDataResource) -> dg.Output[pl.DataFrame]:
    """One row per message (schema.MESSAGE_RECORD) of the chat: a RealTalk/LoCoMo file, or one
    conversation of a chat export (sessions from silence gaps, layers.toml [sessions], which is
    part of an export chat's source version)."""
    with input_problems_as_failures():
        chat = chat_data.read_chat(context.partition_key)
    df = chat.messages
    for note in chat.notes:
        context.log.warning(note)
    return versioned_output(
        df,
        {
            "format": chat.format,
            "source": shown_path(chat.path, chat_data.data_path(), chat_data.home or None),
            "sessions": dg.MetadataValue.int(df["session"].n_unique()),
            "speakers": ", ".join(chat.speakers),
            "zone": f"{chat.tz} ({chat.tz_source})" if chat.tz else "none in the file",
            "system_messages": dg.MetadataValue.int(int(df["system"].sum())),
            "normalizations": dg.MetadataValue.json(chat.notes),
        },
    )


@versioned_asset(
    partitions_def=chat_files,
    group_name="ingest",
    kinds={"polars"},
    deps=[chat_file],
    check_specs=GOLD_QA_CHECKS,
    automation_condition=PARTITION_AUTOMATION,
)
def gold_qa(context: dg.AssetExecutionContext, chat_data: ChatDataResource, messages: pl.DataFrame):
    """Gold questions with evidence ids parsed from the messy annotations (raw kept beside)."""
    source = chat_data.chat_source(context.partition_key)
    if source.format != NATIVE:  # a chat export has no gold questions
        df = schema.empty_frame(schema.GOLD_QA)
    else:
        with input_problems_as_failures():
            df = gold_qa_frame(load_chat(source.path, chat_file=context.partition_key))
    raw_total = int(df["evidence_raw"].list.len().sum() or 0)
    unresolved = df.select(pl.col("unresolved").explode().drop_nulls())["unresolved"].to_list()
    no_gold = int((df["gold_ids"].list.len() == 0).sum()) if df.height else 0
    # Per question: forms read with a guess, and ids not in the chat.
    oddities = {
        row["question_id"]: row["oddities"] + [f"not in the chat: {part}" for part in row["unresolved"]]
        for row in df.select("question_id", "oddities", "unresolved").iter_rows(named=True)
        if row["oddities"] or row["unresolved"]
    }
    yield versioned_output(
        df,
        {
            "questions": dg.MetadataValue.int(df.height),
            "gold_ids": dg.MetadataValue.int(int(df["gold_ids"].list.len().sum() or 0)),
            "unresolved_evidence": dg.MetadataValue.int(len(unresolved)),
            "unresolved_parts": dg.MetadataValue.json(unresolved),
            "questions_without_gold": dg.MetadataValue.int(no_gold),
            "gold_oddities": dg.MetadataValue.json(oddities),
        },
    )
    yield gold_oddities_check(oddities, df.height)
    yield unresolved_gold_share_check(len(unresolved), raw_total)


@versioned_asset(
    partitions_def=chat_files,
    group_name="ingest",
    kinds={"polars"},
    deps=[arc_file],
    automation_condition=PARTITION_AUTOMATION,
)
def arc_cases(context: dg.AssetExecutionContext, chat_data: ChatDataResource, messages: pl.DataFrame):
    """Narrative arc cases of the chat, validated against its message ids (none is fine)."""
    arcs_dir = chat_data.arcs_path()
    path = arcs_file_for(arcs_dir, context.partition_key) if arcs_dir else None
    if path is None:
        df = schema.empty_frame(schema.ARC_CASES)
        return versioned_output(df, {"source": "none (no arcs file for this chat)"})
    with input_problems_as_failures():
        df = load_arc_cases(path, messages)
    phases = int(df["phase_names"].list.len().sum() or 0) if df.height else 0
    return versioned_output(df, {"source": shown_path(path, arcs_dir), "phases": dg.MetadataValue.int(phases)})


@versioned_asset(
    partitions_def=chat_files,
    group_name="ingest",
    deps=[split_config],
    kinds={"polars"},
    automation_condition=PARTITION_AUTOMATION,
)
def split(context: dg.AssetExecutionContext) -> dg.Output[pl.DataFrame]:
    """Train or test: which side of the held-out line this chat file is on (config/split.toml;
    a file matching no pattern counts as train and is reported)."""
    assignment = split_lib.assign(context.partition_key)
    if not assignment.configured:
        context.log.warning(f"{assignment.chat_file} matches no pattern of split.toml: counted as train")
    df = pl.DataFrame(
        {"chat_file": [assignment.chat_file], "split": [assignment.split], "configured": [assignment.configured]},
        schema={"chat_file": pl.String, "split": pl.String, "configured": pl.Boolean},
    )
    return versioned_output(df, {"split": assignment.split, "configured": assignment.configured})


INGEST_ASSETS = [messages, gold_qa, arc_cases, split]
