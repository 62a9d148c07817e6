"""A cached chat grown by appended messages (``chat_append.appended``) is the index a fresh read
of the whole chat builds: every array, list and mapping equal, BM25 scores equal for every token,
speaker aliases voted by old and new messages alike, windows recomputed where they reach the new
rows (plain and chunked cosines)."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import numpy as np
import polars as pl
import pytest
from scipy import sparse

from benchmarks.common import index_chat
from narrative_mirror import schema
from narrative_mirror.chats import load_chat
from narrative_mirror.embedding import message_texts
from narrative_mirror.index_rows import message_rows
from narrative_mirror.index_store import IndexStore
from narrative_mirror.live.index import messages_frame
from narrative_mirror.live.log import LiveMessage
from narrative_mirror.retrieval import chat_index
from narrative_mirror.retrieval.chat_append import NotAppendable, appended
from narrative_mirror.retrieval.chat_index import ChatIndex
from narrative_mirror.retrieval.lexical import BM25Index

CHAT = "Chat_1_Emi_Elise"
DIM = 32
NEW_TEXTS = [
    ("Emi", "I'm Marguerite, by the way, everyone at the harbor calls me that!"),
    ("elise", "Thanks, Marguerite! The zygodactyl woodpecker is back at the mill."),
    ("Emi", "Did you see the heron? It nested by the millrace."),
    ("elise", "Hi Marguerite, the ferry leaves at 9 tomorrow."),
    ("Emi", "I'm Marguerite and I still prefer rye bread to anything."),
    ("elise", "Thanks, Marguerite, see you at the bakery?"),
]


def vectors_of(texts: list[str]) -> np.ndarray:
    out = np.stack(
        [
            np.random.default_rng(int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")).standard_normal(
                DIM
            )
            for t in texts
        ]
    ).astype(np.float32)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def stored(realtalk_dir, tmp_path_factory):
    store = IndexStore(str(tmp_path_factory.mktemp("append") / "lancedb"))
    messages = load_chat(realtalk_dir / f"{CHAT}.json").messages.sort("position")
    index_chat(store, messages, vectors_of(message_texts(messages)))
    return store.messages_for(CHAT), store.blocks_for(CHAT), store.threads_for(CHAT)


def live_rows(after: pl.DataFrame, texts: list[tuple[str, str]]) -> pl.DataFrame:
    """Rows of the ``messages`` table for new messages after ``after``'s last (as a live add writes them)."""
    first, start = after["position"].max() + 1, after["timestamp"].max()
    live = [
        LiveMessage(
            f"L{first + i}",
            first + i,
            author,
            text,
            start + timedelta(minutes=i + 1),
            (start + timedelta(minutes=i + 1)).isoformat(),
        )
        for i, (author, text) in enumerate(texts)
    ]
    frame = messages_frame(CHAT, live)
    embeddings = pl.DataFrame(
        {
            "message_id": frame["message_id"],
            "chat_file": frame["chat_file"],
            "local_id": frame["local_id"],
            "vector": list(vectors_of([f"{a}: {t}" for a, t in texts])),
        },
        schema=schema.MESSAGE_EMBEDDINGS,
    )
    return pl.from_arrow(message_rows(frame, embeddings)).select(after.columns)


def assert_same(grown: ChatIndex, fresh: ChatIndex) -> None:
    assert set(vars(fresh)) <= set(vars(grown))
    for name, want in vars(fresh).items():
        got = getattr(grown, name)
        if isinstance(want, np.ndarray):
            assert got.dtype == want.dtype and np.array_equal(got, want), name
        elif isinstance(want, tuple) and want and isinstance(want[0], np.ndarray):
            assert all(np.array_equal(g, w) for g, w in zip(got, want)), name
        elif isinstance(want, BM25Index):
            tokens = list(fresh.bm25.vocabulary.ids)
            assert got.size == want.size, name
            for token in tokens:
                assert np.array_equal(got.scores(token), want.scores(token)), (name, token)
        elif name == "message_counts":  # token ids may be numbered in another order
            assert sparse.issparse(got) and got.shape[0] == want.shape[0] and got.sum() == want.sum()
        elif name == "entity_matcher":
            assert got.names == want.names
        elif name == "nbytes":
            assert abs(got - want) <= 0.05 * want
        else:
            assert got == want, name


@pytest.mark.parametrize("chunked_from", [10**9, 300, 480])  # plain, chunked, chunked from the second add on
def test_appended_equals_a_fresh_read_of_the_whole_chat(stored, monkeypatch, chunked_from):
    monkeypatch.setattr(chat_index, "CHUNKED_COSINES_FROM", chunked_from)
    messages, blocks, threads = stored
    first = live_rows(messages, NEW_TEXTS[:2])
    second = live_rows(pl.concat([messages, first]), NEW_TEXTS[2:])
    base = ChatIndex(CHAT, messages, blocks, threads, window=2, stem=True)
    grown = appended(appended(base, first), second)
    fresh = ChatIndex(CHAT, pl.concat([messages, first, second]), blocks, threads, window=2, stem=True)
    assert_same(grown, fresh)
    assert fresh.aliases.get("Marguerite") == "Emi" and "Marguerite" not in base.aliases  # voted by old and new rows
    assert grown.bm25.search("zygodactyl woodpecker")[0][0] == messages.height + 1
    assert base.size == messages.height and "zygodactyl" not in base.bm25.vocabulary.ids  # the cached one unchanged


def test_a_new_speaker_votes_again_and_rows_that_do_not_follow_are_refused(stored):
    messages, blocks, threads = stored
    base = ChatIndex(CHAT, messages, blocks, threads, window=2, stem=True)
    newcomer = live_rows(messages, [("Noor", "Hello Emi, thanks Emi, I'm Noor from the choir!"), *NEW_TEXTS])
    fresh = ChatIndex(CHAT, pl.concat([messages, newcomer]), blocks, threads, window=2, stem=True)
    assert_same(appended(base, newcomer), fresh)
    with pytest.raises(NotAppendable):
        appended(base, messages.tail(2))  # rows the chat has
