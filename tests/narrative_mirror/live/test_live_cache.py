"""A live add grows the searching processes' cached copy of the chat by just its new rows: in the
process that added (``on_appended``) and in another one over the same store (its ``refresh`` and
the append journal), without reading the chat whole again; a change that is not an add (a build
of another chat) still drops the cache. Real LanceDB, the real embedder."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from narrative_mirror import schema
from narrative_mirror.index_rows import message_rows
from narrative_mirror.index_store import IndexStore
from narrative_mirror.live.index import messages_frame
from narrative_mirror.live.log import LiveLog
from narrative_mirror.live.memory import serving_memory
from narrative_mirror.retrieval.chat_cache import ChatCache
from narrative_mirror.retrieval.engine import Retriever

WORDS = "harbor garden marathon bakery ferry knee ankle beans rye bridge physio race lunch mill".split()


def seed(root: Path, store: IndexStore, chat: str, n: int, dim: int) -> None:
    """A live chat of ``n`` messages: its log, and index rows with random unit vectors."""
    rng = np.random.default_rng(len(chat))
    start = datetime(2024, 1, 1)
    LiveLog(root).append(
        chat,
        [
            {
                "author": "AB"[i % 2],
                "text": f"{' '.join(rng.choice(WORDS, 6))} {i}",
                "timestamp": (start + timedelta(minutes=i)).isoformat(),
            }
            for i in range(n)
        ],
    )
    frame = messages_frame(chat, LiveLog(root).messages(chat))
    vectors = rng.normal(size=(n, dim)).astype(np.float32)
    embeddings = pl.DataFrame(
        {
            "message_id": frame["message_id"],
            "chat_file": frame["chat_file"],
            "local_id": frame["local_id"],
            "vector": list(vectors / np.linalg.norm(vectors, axis=1, keepdims=True)),
        },
        schema=schema.MESSAGE_EMBEDDINGS,
    )
    store.add_rows("messages", chat, message_rows(frame, embeddings))


def ids(retriever: Retriever, chat: str, query: str, variant: str) -> list[str]:
    return [hit.local_id for hit in retriever.search(chat, query, k=3, variant=variant).hits]


def test_adds_grow_the_cached_chat_here_and_in_another_process(tmp_path, embedder, monkeypatch):
    monkeypatch.setattr(ChatCache, "REFRESH_SECONDS", 0.0)  # every query compares the table versions
    root, uri = tmp_path / "live", str(tmp_path / "lancedb")
    seed(root, IndexStore(uri), "river_A_B", 400, embedder.dimension)
    seed(root, IndexStore(uri), "field_A_B", 50, embedder.dimension)
    here, there = Retriever(IndexStore(uri), embedder), Retriever(IndexStore(uri), embedder)
    live_here, live_there = serving_memory(root, here), serving_memory(root, there)  # two processes
    for retriever in (here, there):
        for chat in ("river_A_B", "field_A_B"):
            retriever.search(chat, "ferry", k=3)
    assert here.cache_info()["loads"] == there.cache_info()["loads"] == 2

    added = live_here.add(
        "river_A_B",
        [
            {
                "author": "A",
                "text": "The zygodactyl woodpecker drums on the old lighthouse.",
                "timestamp": "2025-01-01T08:00:00Z",
            },
            {
                "author": "B",
                "text": "Bring the spotting scope to the lighthouse tomorrow.",
                "timestamp": "2025-01-01T08:01:00Z",
            },
        ],
    )
    assert added.stored == ["L400", "L401"]
    assert ids(here, "river_A_B", "zygodactyl", "bm25") == ["L400"]
    assert ids(here, "river_A_B", "The zygodactyl woodpecker drums on the old lighthouse.", "dense")[0] == "L400"
    live_there.refresh("river_A_B")  # what serve does before each request that reads the chat
    assert ids(there, "river_A_B", "spotting scope", "bm25") == ["L401"]
    assert ids(there, "field_A_B", "ferry", "bm25")  # the other chat stayed cached
    for info in (here.cache_info(), there.cache_info()):
        assert (info["loads"], info["appends"]) == (2, 1), info  # no chat was read whole again
    assert here.chat("river_A_B").size == there.chat("river_A_B").size == 402

    # a second add, seen by the other process only through the table versions and the journal
    live_here.add(
        "river_A_B", [{"author": "A", "text": "A kingfisher at the millrace.", "timestamp": "2025-01-02T08:00:00Z"}]
    )
    assert ids(there, "river_A_B", "kingfisher millrace", "bm25") == ["L402"]
    assert (there.cache_info()["loads"], there.cache_info()["appends"]) == (2, 2)

    # anything that is not an add (here: rows of another chat replaced) drops the cache as before
    store = IndexStore(uri)
    store.replace_partition("messages", "field_A_B", store._read("messages", "field_A_B"))
    assert ids(there, "river_A_B", "kingfisher millrace", "bm25") == ["L402"]
    assert there.cache_info()["loads"] == 3


def test_a_forget_in_another_process_makes_the_cache_read_the_chat_whole(tmp_path, embedder):
    root, uri = tmp_path / "live", str(tmp_path / "lancedb")
    seed(root, IndexStore(uri), "pond_A_B", 30, embedder.dimension)
    there = Retriever(IndexStore(uri), embedder)
    live_there = serving_memory(root, there)
    assert ids(there, "pond_A_B", "ferry", "bm25")
    IndexStore(uri).delete_rows("messages", "pond_A_B", ["pond_A_B/L3"])  # as a forget does
    there.cache.mark_behind("pond_A_B")  # the marker another process's forget leaves
    assert there.chat("pond_A_B").size == 29 and "L3" not in there.chat("pond_A_B").row_of
    assert live_there is not None and there.cache_info()["loads"] == 2
