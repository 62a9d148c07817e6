"""Hand-made layer frames of a small chat (messages, embeddings, blocks, signals, threads) for the
index tests: ``chat_frames(chat_file, texts)``."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import polars as pl

from narrative_mirror import schema

DIM = 4


def chat_frames(chat_file: str, texts: list[str]):
    """Hand-made layers: messages alternate speakers A/B, blocks of 2 messages, one thread of all."""
    n = len(texts)
    local_ids = [f"D1:{i + 1}" for i in range(n)]
    messages = pl.DataFrame(
        {
            "message_id": [f"{chat_file}/{lid}" for lid in local_ids],
            "chat_file": [chat_file] * n,
            "local_id": local_ids,
            "position": list(range(n)),
            "session": [1] * n,
            "speaker": ["A" if i % 2 == 0 else "B" for i in range(n)],
            "text": texts,
            "timestamp": [datetime(2024, 1, 1, 10, i) for i in range(n)],
            "image_urls": [[] for _ in range(n)],
            "image_caption": ["a red bike" if i == 1 else "" for i in range(n)],
        },
        schema=schema.MESSAGES,
    )
    # message i's vector: unit vector on axis i % DIM
    vectors = np.eye(DIM, dtype=np.float32)[[i % DIM for i in range(n)]]
    embeddings = pl.DataFrame(
        {
            "message_id": messages["message_id"],
            "chat_file": messages["chat_file"],
            "local_id": messages["local_id"],
            "vector": list(vectors),
        },
        schema=schema.MESSAGE_EMBEDDINGS,
    )
    blocks = pl.DataFrame(
        {
            "block_id": [f"{chat_file}/S1/B{b}" for b in range(n // 2)],
            "chat_file": [chat_file] * (n // 2),
            "session": [1] * (n // 2),
            "block_index": list(range(n // 2)),
            "first_position": [2 * b for b in range(n // 2)],
            "last_position": [2 * b + 1 for b in range(n // 2)],
            "message_ids": [local_ids[2 * b : 2 * b + 2] for b in range(n // 2)],
            "start_time": [datetime(2024, 1, 1, 10, 2 * b) for b in range(n // 2)],
            "end_time": [datetime(2024, 1, 1, 10, 2 * b + 1) for b in range(n // 2)],
            "speakers": [["A", "B"]] * (n // 2),
            "keywords": [["kw"]] * (n // 2),
            "label": [f"label {b}" for b in range(n // 2)],
            "summary": [f"summary {b}" for b in range(n // 2)],
        },
        schema=schema.BLOCKS,
    )
    signals = pl.DataFrame(
        {
            "message_id": messages["message_id"],
            "chat_file": messages["chat_file"],
            "local_id": messages["local_id"],
            "block_id": [f"{chat_file}/S1/B{i // 2}" for i in range(n)],
            "entities": [["bike"] if i == 1 else [] for i in range(n)],
            "temporal": [[] for _ in range(n)],
            "is_plan": [False] * n,
            "is_question": [False] * n,
            "sentiment": [0.0] * n,
            "emotion": [""] * n,
            "has_image": [i == 1 for i in range(n)],
            "ref_block_ids": [[] for _ in range(n)],
            "refs": [0.5 if i == 2 else 0.0 for i in range(n)],
            "importance_tier": [3 if i == 0 else 1 for i in range(n)],
        },
        schema=schema.MESSAGE_SIGNALS,
    )
    threads = pl.DataFrame(
        {
            "thread_id": [f"{chat_file}/T0"],
            "chat_file": [chat_file],
            "block_ids": [[f"{chat_file}/S1/B{b}" for b in range(n // 2)]],
            "start_time": [datetime(2024, 1, 1, 10, 0)],
            "end_time": [datetime(2024, 1, 1, 10, 3)],
            "participants": [["A", "B"]],
            "entities": [["bike"]],
            "title": ["Bikes"],
            "summary": ["About bikes"],
        },
        schema=schema.THREADS,
    )
    return messages, embeddings, blocks, signals, threads


TEXTS = ["hello there", "look at my bike", "nice bike", "thanks"]


def index_messages(store, messages: pl.DataFrame, vectors) -> None:
    """The real layers (L1, L1.5, L2) and index rows of ``messages`` (one chat's message record)
    with their ``vectors``, written to ``store`` under the chat's partition, as the asset graph builds
    them."""
    from narrative_mirror import settings
    from narrative_mirror.index_rows import build_rows
    from narrative_mirror.layers import block_vectors, build_threads, build_topic_blocks, compute_signals

    vectors = np.asarray(vectors)
    config = settings.load_config("layers")
    blocks = build_topic_blocks(messages, vectors, config)
    signals = compute_signals(messages, blocks, config)
    threads = build_threads(blocks, signals, block_vectors(blocks, messages, vectors), config)
    embeddings = pl.DataFrame(
        {
            "message_id": messages["message_id"],
            "chat_file": messages["chat_file"],
            "local_id": messages["local_id"],
            "vector": list(vectors),
        },
        schema=schema.MESSAGE_EMBEDDINGS,
    )
    for table, rows in build_rows(messages, embeddings, signals=signals, blocks=blocks, threads=threads).items():
        store.replace_partition(table, messages["chat_file"][0], rows)


def index_export_folder(chats, lancedb, embedder):
    """(retriever, {chat key: messages}) of every export in the folder ``chats``, read by the export
    readers in Europe/London and indexed with their real layers into a LanceDB at ``lancedb``."""
    from narrative_mirror.embedding import message_texts
    from narrative_mirror.exports.folder import ImportOptions, find_folder_chats
    from narrative_mirror.exports.frames import load_export_chat
    from narrative_mirror.index_store import IndexStore
    from narrative_mirror.retrieval.engine import Retriever

    options = ImportOptions(tz="Europe/London", machine_tz="Europe/London")
    found, problems = find_folder_chats(chats, options)
    assert problems == [], problems
    store = IndexStore(str(lancedb))
    frames = {}
    for key, source in found.items():
        messages = load_export_chat(source, options).messages.with_columns(
            pl.lit(key).alias("chat_file"), (pl.lit(f"{key}/") + pl.col("local_id")).alias("message_id")
        )
        index_messages(store, messages, embedder.encode(message_texts(messages)))
        frames[key] = messages
    return Retriever(store, embedder), frames


def index_whatsapp_text(folder, name: str, text: str, embedder):
    """(retriever, chat key, messages) of a WhatsApp Android export ``text`` written to ``folder``
    as ``WhatsApp Chat with <name>.txt``, read by the export reader in Europe/London and indexed
    with its real layers into a LanceDB in ``folder``."""
    (folder / f"WhatsApp Chat with {name}.txt").write_text(text, encoding="utf-8")
    retriever, frames = index_export_folder(folder, folder / "lancedb", embedder)
    ((key, messages),) = frames.items()
    return retriever, key, messages
