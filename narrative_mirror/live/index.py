"""The index rows of a live chat's new messages: encoded (only those messages) and inserted into
the ``messages`` table beside the chat's rows, so message-level dense and full-text search find
them as soon as the insert returns (full-text search reads rows not yet in its index too)."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl
import pyarrow as pa

from narrative_mirror import schema
from narrative_mirror.embedding import Embedder, message_search_text
from narrative_mirror.index_rows import message_rows
from narrative_mirror.index_store import IndexStore
from narrative_mirror.live.log import LiveMessage

LIVE_SESSION = 1  # a live chat is one session; its L1 blocks (built by Dagster) split it by topic


def messages_frame(chat: str, messages: Sequence[LiveMessage]) -> pl.DataFrame:
    """``messages`` in the shape of the ``messages`` layer (``schema.MESSAGES``)."""
    return pl.DataFrame(
        {
            "message_id": [f"{chat}/{m.local_id}" for m in messages],
            "chat_file": [chat] * len(messages),
            "local_id": [m.local_id for m in messages],
            "position": [m.position for m in messages],
            "session": [LIVE_SESSION] * len(messages),
            "speaker": [m.author for m in messages],
            "text": [m.text for m in messages],
            "timestamp": [m.timestamp for m in messages],
            "image_urls": [[] for _ in messages],
            "image_caption": [""] * len(messages),
        },
        schema=schema.MESSAGES,
    )


def index_rows(chat: str, messages: Sequence[LiveMessage], embedder: Embedder) -> pa.Table:
    """The ``messages`` table rows of ``messages``: one encode of their search texts."""
    frame = messages_frame(chat, messages).with_columns(
        pl.Series("reply_to", [m.reply_to for m in messages], dtype=pl.String)
    )
    vectors = embedder.encode([message_search_text(m.author, m.text) for m in messages])
    embeddings = pl.DataFrame(
        {
            "message_id": frame["message_id"],
            "chat_file": frame["chat_file"],
            "local_id": frame["local_id"],
            "vector": [row.tolist() for row in vectors],
        },
        schema=schema.MESSAGE_EMBEDDINGS,
    )
    return message_rows(frame, embeddings)


def index_new(
    store: IndexStore, chat: str, log_messages: Sequence[LiveMessage], embedder: Embedder
) -> tuple[int, int | None]:
    """Insert the messages of the chat's log that the index lacks (those past its row count: the
    log and the index hold them in the same order); returns how many and the ``messages`` table
    version that holds them (None when none were missing). Call it under the chat's lock, so the
    count is not read while another writer inserts."""
    indexed = store.chat_row_count("messages", chat)
    missing = list(log_messages[indexed:])  # positions are 0, 1, 2, ... in log order
    if not missing:
        return 0, None
    return len(missing), store.add_rows("messages", chat, index_rows(chat, missing, embedder))
