"""The rows of the index's tables: their Arrow schemas (``messages``: L0 + L1.5 signals,
``blocks``: L1, ``threads``: L2) and how one chat's layer frames become those rows.

Block and thread vectors are the normalized mean of their member message vectors, so indexing
needs no encode beyond the messages'. ``IndexStore`` writes the rows (``replace_partition``).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa

from narrative_mirror import schema
from narrative_mirror.embedding import message_search_text, vector_matrix

_TS = pa.timestamp("us")
_STRINGS = pa.list_(pa.string())
# schema.REACTION as the index stores it.
_REACTIONS = pa.list_(pa.struct([("emoji", pa.string()), ("people", _STRINGS), ("count", pa.int64())]))


def message_schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            ("message_id", pa.string()),
            ("chat_file", pa.string()),
            ("local_id", pa.string()),
            ("position", pa.int64()),
            ("session", pa.int64()),
            ("speaker", pa.string()),
            ("raw_text", pa.string()),  # the message as written
            ("text", pa.string()),  # what is searched: "speaker: text [image: caption]"
            ("timestamp", _TS),
            ("block_id", pa.string()),
            ("refs", pa.float64()),
            ("importance_tier", pa.int64()),
            ("entities", _STRINGS),
            ("temporal", _STRINGS),
            ("vector", pa.list_(pa.float32(), dim)),
            # Last, so a table written before it existed takes it as an added column (null).
            ("reply_to", pa.string()),  # local_id of the message this one answers, else null
            ("edited", pa.bool_()),  # the text is the edited one (exports keep only the final text)
            ("bot", pa.bool_()),  # written by a bot or an integration, not a person
            ("reactions", _REACTIONS),  # schema.REACTION: shown with the message, never searched
        ]
    )


def columns_added(table: pa.Schema, rows: pa.Schema) -> list[pa.Field]:
    """The columns ``rows`` have after all of ``table``'s (same names and types, in order): what
    a table written before those columns existed lacks ([] when there is nothing to add or the
    schemas differ otherwise)."""
    head = list(rows)[: len(table)]
    if len(rows) <= len(table) or [(f.name, f.type) for f in head] != [(f.name, f.type) for f in table]:
        return []
    return list(rows)[len(table) :]


def block_schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            ("block_id", pa.string()),
            ("chat_file", pa.string()),
            ("session", pa.int64()),
            ("block_index", pa.int64()),
            ("first_position", pa.int64()),
            ("last_position", pa.int64()),
            ("message_ids", _STRINGS),  # ALL local ids of the block, in order
            ("start_time", _TS),
            ("end_time", _TS),
            ("text", pa.string()),  # label, summary and keywords
            ("vector", pa.list_(pa.float32(), dim)),
        ]
    )


def thread_schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            ("thread_id", pa.string()),
            ("chat_file", pa.string()),
            ("block_ids", _STRINGS),
            ("start_time", _TS),
            ("end_time", _TS),
            ("text", pa.string()),  # title and summary
            ("vector", pa.list_(pa.float32(), dim)),
        ]
    )


def _vector_lookup(embeddings: pl.DataFrame) -> tuple[dict[str, int], np.ndarray]:
    emb = schema.conform(embeddings, schema.MESSAGE_EMBEDDINGS, "message embeddings")
    if emb.height == 0:
        raise ValueError("message embeddings: no rows")
    lengths = emb["vector"].list.len().unique().to_list()
    if len(lengths) != 1:
        raise ValueError(f"message embeddings: vectors of different lengths {sorted(lengths)}")
    matrix = vector_matrix(emb["vector"])
    return {mid: i for i, mid in enumerate(emb["message_id"].to_list())}, matrix


def _fixed_vectors(matrix: np.ndarray) -> pa.FixedSizeListArray:
    matrix = np.ascontiguousarray(matrix, dtype=np.float32)
    return pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1)), matrix.shape[1])


def _mean_vector(matrix: np.ndarray, rows: list[int]) -> np.ndarray:
    mean = matrix[rows].mean(axis=0)
    norm = float(np.linalg.norm(mean))
    return mean / norm if norm > 0 else mean


def _is_system(messages: pl.DataFrame) -> pl.Expr:
    return pl.col("system").fill_null(False) if "system" in messages.columns else pl.lit(False)


def indexed_messages(messages: pl.DataFrame) -> pl.DataFrame:
    """The messages the index holds: all but system lines (joins, calls, group changes), which
    stay in the transcript and out of retrieval. The index's rows and its check both use this."""
    return messages.filter(~_is_system(messages))


def message_rows(messages: pl.DataFrame, embeddings: pl.DataFrame, signals: pl.DataFrame | None = None) -> pa.Table:
    """Rows of the ``messages`` table: one per indexed message (:func:`indexed_messages`),
    vector from ``embeddings``."""
    messages = indexed_messages(messages)
    replies = (
        messages["reply_to"] if "reply_to" in messages.columns else pl.Series([None] * messages.height, dtype=pl.String)
    )
    flags = [
        (messages[name].fill_null(False) if name in messages.columns else pl.Series([False] * messages.height))
        .cast(pl.Boolean)
        .alias(name)
        for name in ("edited", "bot")
    ]
    reactions = (
        messages["reactions"].fill_null([])
        if "reactions" in messages.columns
        else pl.Series([[]] * messages.height, dtype=pl.List(schema.REACTION))
    )
    msgs = schema.conform(messages, schema.MESSAGES, "messages").with_columns(
        replies.cast(pl.String).alias("reply_to"), *flags, reactions.alias("reactions")
    )
    msgs = msgs.sort("position")
    lookup, matrix = _vector_lookup(embeddings)
    missing = [m for m in msgs["message_id"].to_list() if m not in lookup]
    if missing:
        raise ValueError(f"message embeddings: no vector for {len(missing)} messages, e.g. {missing[:3]}")
    if signals is not None and signals.height:
        sig = schema.conform(signals, schema.MESSAGE_SIGNALS, "message signals")
        msgs = msgs.join(
            sig.select("message_id", "block_id", "refs", "importance_tier", "entities", "temporal"),
            on="message_id",
            how="left",
        )
    else:
        msgs = msgs.with_columns(
            pl.lit(None, pl.String).alias("block_id"),
            pl.lit(None, pl.Float64).alias("refs"),
            pl.lit(None, pl.Int64).alias("importance_tier"),
            pl.lit(None, pl.List(pl.String)).alias("entities"),
            pl.lit(None, pl.List(pl.String)).alias("temporal"),
        )
    msgs = msgs.with_columns(
        pl.col("refs").fill_null(0.0),
        pl.col("importance_tier").fill_null(0),
        pl.col("entities").fill_null([]),
        pl.col("temporal").fill_null([]),
    )
    vectors = matrix[[lookup[m] for m in msgs["message_id"].to_list()]]
    text = [
        message_search_text(s, t, c)
        for s, t, c in zip(msgs["speaker"], msgs["text"], msgs["image_caption"].fill_null(""))
    ]
    return pa.table(
        {
            "message_id": msgs["message_id"].to_arrow(),
            "chat_file": msgs["chat_file"].to_arrow(),
            "local_id": msgs["local_id"].to_arrow(),
            "position": msgs["position"].to_arrow(),
            "session": msgs["session"].to_arrow(),
            "speaker": msgs["speaker"].to_arrow(),
            "raw_text": msgs["text"].to_arrow(),
            "text": pa.array(text, pa.string()),
            "timestamp": msgs["timestamp"].to_arrow(),
            "block_id": msgs["block_id"].to_arrow(),
            "refs": msgs["refs"].to_arrow(),
            "importance_tier": msgs["importance_tier"].to_arrow(),
            "entities": msgs["entities"].to_arrow(),
            "temporal": msgs["temporal"].to_arrow(),
            "vector": _fixed_vectors(vectors),
            "reply_to": msgs["reply_to"].to_arrow(),
            "edited": msgs["edited"].to_arrow(),
            "bot": msgs["bot"].to_arrow(),
            "reactions": msgs["reactions"].to_arrow().cast(_REACTIONS),
        },
        schema=message_schema(matrix.shape[1]),
    )


def _member_rows(lookup: dict[str, int], chat_file: str, local_ids: list[str], where: str) -> list[int]:
    rows = [lookup.get(f"{chat_file}/{lid}") for lid in local_ids]
    if not local_ids or None in rows:
        absent = [lid for lid, r in zip(local_ids, rows) if r is None]
        raise ValueError(f"{where}: members without a message vector: {absent[:3] or 'no members'}")
    return rows


def block_rows(blocks: pl.DataFrame, embeddings: pl.DataFrame) -> pa.Table:
    """Rows of the ``blocks`` table; vector = normalized mean of the member message vectors."""
    blk = schema.conform(blocks, schema.BLOCKS, "blocks").sort("block_index")
    lookup, matrix = _vector_lookup(embeddings)
    vectors = np.zeros((blk.height, matrix.shape[1]), dtype=np.float32)
    texts = []
    for i, row in enumerate(blk.iter_rows(named=True)):
        members = _member_rows(lookup, row["chat_file"], row["message_ids"], f"block {row['block_id']}")
        vectors[i] = _mean_vector(matrix, members)
        texts.append(" ".join(p for p in (row["label"], row["summary"], " ".join(row["keywords"] or [])) if p))
    return pa.table(
        {
            **{
                c: blk[c].to_arrow()
                for c in (
                    "block_id",
                    "chat_file",
                    "session",
                    "block_index",
                    "first_position",
                    "last_position",
                    "message_ids",
                    "start_time",
                    "end_time",
                )
            },
            "text": pa.array(texts, pa.string()),
            "vector": _fixed_vectors(vectors),
        },
        schema=block_schema(matrix.shape[1]),
    )


def thread_rows(threads: pl.DataFrame, blocks: pl.DataFrame, embeddings: pl.DataFrame) -> pa.Table:
    """Rows of the ``threads`` table; vector = normalized mean of all member messages' vectors."""
    thr = schema.conform(threads, schema.THREADS, "threads").sort("thread_id")
    blk = schema.conform(blocks, schema.BLOCKS, "blocks")
    block_members = dict(zip(blk["block_id"].to_list(), blk["message_ids"].to_list()))
    lookup, matrix = _vector_lookup(embeddings)
    vectors = np.zeros((thr.height, matrix.shape[1]), dtype=np.float32)
    for i, row in enumerate(thr.iter_rows(named=True)):
        unknown = [b for b in row["block_ids"] if b not in block_members]
        if unknown:
            raise ValueError(f"thread {row['thread_id']}: unknown block ids {unknown[:3]}")
        local_ids = [lid for b in row["block_ids"] for lid in block_members[b]]
        vectors[i] = _mean_vector(
            matrix, _member_rows(lookup, row["chat_file"], local_ids, f"thread {row['thread_id']}")
        )
    texts = [f"{t}. {s}" if t and s else (t or s or "") for t, s in zip(thr["title"], thr["summary"])]
    return pa.table(
        {
            **{c: thr[c].to_arrow() for c in ("thread_id", "chat_file", "block_ids", "start_time", "end_time")},
            "text": pa.array(texts, pa.string()),
            "vector": _fixed_vectors(vectors),
        },
        schema=thread_schema(matrix.shape[1]),
    )


def _without_members(blocks: pl.DataFrame, threads: pl.DataFrame | None, local_ids: list[str]):
    blocks = blocks.with_columns(pl.col("message_ids").list.filter(~pl.element().is_in(local_ids)))
    empty = blocks.filter(pl.col("message_ids").list.len() == 0)["block_id"].to_list()
    blocks = blocks.filter(pl.col("message_ids").list.len() > 0)
    if threads is not None and empty:
        threads = threads.with_columns(pl.col("block_ids").list.filter(~pl.element().is_in(empty)))
        threads = threads.filter(pl.col("block_ids").list.len() > 0)
    return blocks, threads


def build_rows(
    messages: pl.DataFrame,
    embeddings: pl.DataFrame,
    *,
    signals: pl.DataFrame | None = None,
    blocks: pl.DataFrame | None = None,
    threads: pl.DataFrame | None = None,
) -> dict[str, pa.Table]:
    """Arrow rows of every table for one chat; tables whose layer is absent are left out.
    System lines are in no table: not as messages, not as block members (a block or thread left
    without members is left out)."""
    system = messages.filter(_is_system(messages))["local_id"].to_list()
    if system and blocks is not None:
        blocks, threads = _without_members(blocks, threads, system)
    rows = {"messages": message_rows(messages, embeddings, signals)}
    if blocks is not None:
        rows["blocks"] = block_rows(blocks, embeddings)
        if threads is not None:
            rows["threads"] = thread_rows(threads, blocks, embeddings)
    elif threads is not None:
        raise ValueError("threads given without their blocks")
    return rows
