"""Memory layers per chat file: message embeddings, L1 topic blocks, L1.5 signals and L2
threads. Each returns a content-hash data version, so re-running an asset with
an unchanged output leaves everything downstream fresh."""

import time

import dagster as dg
import numpy as np
import polars as pl

from assets.freshness import PARTITION_AUTOMATION
from assets.layers.checks import L1_CHECK_SPECS, L2_CHECK_SPECS, every_message_in_one_block, no_empty_thread
from assets.partitions import chat_files
from assets.sources.assets import PROMPTS, embedding_config, layers_config
from assets.versioning import EMBEDDER_POOL, LLM_POOL, versioned_asset, versioned_output
from narrative_mirror import schema, settings
from narrative_mirror.embedding import encode_reusing, message_texts, vector_matrix
from resources.dagster_resources import EmbedderResource, LLMResource, StateResource


def _vectors(embeddings: pl.DataFrame) -> np.ndarray:
    return vector_matrix(embeddings["vector"])


def _summarizer(llm: LLMResource, config: dict):
    """LLM-written labels when an LLM is configured (extractive on its failures), else None."""
    from narrative_mirror.layers.params import SummaryParams, section
    from narrative_mirror.layers.summarize import ExtractiveSummarizer, LLMSummarizer

    client = llm.get()
    if client is None:
        return None, None  # the layers' own offline labels (chat-wide TF-IDF, central messages)
    offline = ExtractiveSummarizer(section(config, "summary", SummaryParams))
    return LLMSummarizer(client, fallback=offline), client


PROGRESS_EVERY_S = 5.0


@versioned_asset(
    partitions_def=chat_files,
    group_name="layers",
    deps=[embedding_config],
    pool=EMBEDDER_POOL,
    kinds={"pytorch", "polars"},
    automation_condition=PARTITION_AUTOMATION,
)
def message_embeddings(
    context: dg.AssetExecutionContext, messages: pl.DataFrame, embedder: EmbedderResource, state: StateResource
) -> dg.Output[pl.DataFrame]:
    """One L2-normalized vector per message (``speaker: text``), batched, with progress.

    Vectors of this chat's previous output are reused when model and text are unchanged, and
    each distinct text is encoded once: an edited chat costs an encode per new or changed message.
    """
    model = embedder.get()
    texts = message_texts(messages)
    previous = state.stored_frame("message_embeddings", context.partition_key)
    known = {}
    if previous is not None and "vector_key" in previous.columns:
        known = dict(zip(previous["vector_key"].to_list(), vector_matrix(previous["vector"])))
    started = time.perf_counter()
    last_log = started

    def progress(done: int, total: int) -> None:
        # Every log line is an event-log write: one every few seconds is progress enough.
        nonlocal last_log
        now = time.perf_counter()
        if now - last_log >= PROGRESS_EVERY_S or done == total:
            last_log = now
            context.log.info(f"embedded {done}/{total} new texts ({done / max(now - started, 1e-9):.0f}/s)")

    vectors, keys, encoded = encode_reusing(model, texts, known, progress=progress)
    seconds = time.perf_counter() - started
    df = pl.DataFrame(
        {
            "message_id": messages["message_id"],
            "chat_file": messages["chat_file"],
            "local_id": messages["local_id"],
            "vector": pl.Series(vectors).cast(pl.List(pl.Float32)),
        }
    )
    df = schema.conform(df, schema.MESSAGE_EMBEDDINGS, "message_embeddings").with_columns(
        vector_key=pl.Series(keys, dtype=pl.String)
    )
    return versioned_output(
        df,
        {
            "model": model.model_name,
            "dimension": dg.MetadataValue.int(model.dimension),
            "encoded_messages": dg.MetadataValue.int(encoded),
            "reused_vectors": dg.MetadataValue.int(len(texts) - encoded),
            "encode_seconds": dg.MetadataValue.float(round(seconds, 3)),
            "messages_per_second": dg.MetadataValue.float(round(encoded / seconds, 1) if seconds and encoded else 0.0),
        },
    )


@versioned_asset(
    partitions_def=chat_files,
    group_name="layers",
    pool=LLM_POOL,
    deps=[layers_config, PROMPTS["block_summary"]],
    kinds={"polars"},
    automation_condition=PARTITION_AUTOMATION,
    check_specs=L1_CHECK_SPECS,
)
def l1_topics(
    context: dg.AssetExecutionContext, messages: pl.DataFrame, message_embeddings: pl.DataFrame, llm: LLMResource
):
    """L1: contiguous topic blocks per session; every message in exactly one block."""
    from narrative_mirror.layers.l1_topics import build_topic_blocks

    config = settings.load_config("layers")
    summarizer, client = _summarizer(llm, config)
    blocks = build_topic_blocks(messages, _vectors(message_embeddings), config, summarizer=summarizer)
    covered = int(blocks["message_ids"].list.len().sum() or 0)
    yield versioned_output(
        blocks,
        {
            "blocks": dg.MetadataValue.int(blocks.height),
            "messages_in_blocks": dg.MetadataValue.int(covered),
            "messages": dg.MetadataValue.int(messages.height),
            "mean_block_size": dg.MetadataValue.float(round(covered / max(blocks.height, 1), 2)),
            "summarizer": "llm" if client else "extractive",
            "summarizer_fallbacks": dg.MetadataValue.int(summarizer.fallbacks if client else 0),
        },
    )
    yield every_message_in_one_block(messages, blocks)


@versioned_asset(
    partitions_def=chat_files,
    group_name="layers",
    deps=[layers_config],
    kinds={"polars"},
    automation_condition=PARTITION_AUTOMATION,
)
def l15_signals(
    context: dg.AssetExecutionContext, messages: pl.DataFrame, l1_topics: pl.DataFrame
) -> dg.Output[pl.DataFrame]:
    """L1.5: per-message metadata signals (entities, time, plans, questions, sentiment, refs, tier)."""
    from narrative_mirror.layers.l15_signals import compute_signals

    signals = compute_signals(messages, l1_topics, settings.load_config("layers"))
    tiers = signals.group_by("importance_tier").len().sort("importance_tier")
    return versioned_output(
        signals,
        {
            "plans": dg.MetadataValue.int(int(signals["is_plan"].sum())),
            "questions": dg.MetadataValue.int(int(signals["is_question"].sum())),
            "messages_with_refs": dg.MetadataValue.int(int((signals["ref_block_ids"].list.len() > 0).sum())),
            "tiers": dg.MetadataValue.json({str(t): n for t, n in tiers.rows()}),
        },
    )


@versioned_asset(
    partitions_def=chat_files,
    group_name="layers",
    pool=LLM_POOL,
    deps=[layers_config, PROMPTS["thread_summary"]],
    kinds={"polars"},
    automation_condition=PARTITION_AUTOMATION,
    check_specs=L2_CHECK_SPECS,
)
def l2_threads(
    context: dg.AssetExecutionContext,
    messages: pl.DataFrame,
    message_embeddings: pl.DataFrame,
    l1_topics: pl.DataFrame,
    l15_signals: pl.DataFrame,
    llm: LLMResource,
):
    """L2: storylines linking blocks across sessions (thread -> block -> message)."""
    from narrative_mirror.layers.l2_threads import block_vectors, build_threads

    config = settings.load_config("layers")
    summarizer, client = _summarizer(llm, config)
    vectors = block_vectors(l1_topics, messages, _vectors(message_embeddings))
    threads = build_threads(l1_topics, l15_signals, vectors, config, summarizer=summarizer)
    in_threads = {b for ids in threads["block_ids"].to_list() for b in ids}
    yield versioned_output(
        threads,
        {
            "threads": dg.MetadataValue.int(threads.height),
            "blocks_in_threads": dg.MetadataValue.int(len(in_threads)),
            "blocks": dg.MetadataValue.int(l1_topics.height),
            "summarizer": "llm" if client else "extractive",
            "summarizer_fallbacks": dg.MetadataValue.int(summarizer.fallbacks if client else 0),
        },
    )
    yield no_empty_thread(threads, l1_topics)


LAYER_ASSETS = [message_embeddings, l1_topics, l15_signals, l2_threads]
