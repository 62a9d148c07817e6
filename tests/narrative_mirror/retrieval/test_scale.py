"""Retrieval at chat scale: the fast paths give the same numbers as the plain ones, and the chat
cache is bounded in bytes (LRU) yet answers any chat.

Chats here are RealTalk chats indexed with their real layers but hash-seeded random vectors
(``HashEmbedder``), so no model is loaded and every test stays well under a few seconds.
"""

from __future__ import annotations

import hashlib
import threading
import time

import numpy as np
import pytest

from benchmarks.common import index_chat
from narrative_mirror import settings
from narrative_mirror.chats import load_chat
from narrative_mirror.embedding import message_texts
from narrative_mirror.index_store import IndexStore
from narrative_mirror.retrieval import chat_index, dense
from narrative_mirror.retrieval.chat_index import window_means
from narrative_mirror.retrieval.engine import Retriever
from narrative_mirror.retrieval.hybrid import spread
from narrative_mirror.retrieval.learned_fusion import neighbour_max, neighbour_max_at

DIM = 32
CHATS = ("Chat_1_Emi_Elise", "Chat_2_Kevin_Elise", "Chat_3_Kevin_Paola")


class HashEmbedder:
    """Unit vectors seeded by the text: the same text, the same vector (no model)."""

    fingerprint = f"hash:{DIM}"
    dimension = DIM

    def encode(self, texts, progress=None):
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            out[i] = np.random.default_rng(seed).standard_normal(DIM)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def store(realtalk_dir, tmp_path_factory):
    store = IndexStore(str(tmp_path_factory.mktemp("scale") / "lancedb"))
    for name in CHATS:
        messages = load_chat(realtalk_dir / f"{name}.json").messages.sort("position")
        index_chat(store, messages, HashEmbedder().encode(message_texts(messages)))  # as the benchmarks index
    return store


@pytest.fixture(scope="module")
def questions(realtalk_dir):
    from narrative_mirror.gold import gold_qa_frame

    return gold_qa_frame(load_chat(realtalk_dir / "Chat_1_Emi_Elise.json"))["question"].to_list()[:12]


def bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def snapshot(result) -> tuple:
    return (
        [(h.local_id, h.score, tuple(h.sources)) for h in result.hits],
        result.trace.candidates,
        result.trace.reranked,
        result.query_info,
    )


# -- the fast paths compute the same numbers ---------------------------------------------------------
def test_chunked_cosines_do_not_depend_on_the_batch_and_round_like_one_call():
    rng = np.random.default_rng(0)
    matrix = dense.normalize_rows(rng.standard_normal((5003, 384)))
    queries = dense.normalize_rows(rng.standard_normal((4, 384)))
    for chunk in (1, 7, 512, 4096, 10_000):
        many = dense.cosine_scores_chunked(matrix, queries, chunk=chunk)
        for i, q in enumerate(queries):
            alone = dense.cosine_scores_chunked(matrix, q.reshape(1, -1), chunk=chunk)[0]
            assert bits(many[i]) == bits(alone), (chunk, i)  # a batch changes nothing
            one_call = dense.cosine_scores(matrix, q)
            assert np.abs(many[i] - one_call).max() <= 1e-6  # float32 rounding at most
            if chunk >= matrix.shape[0]:
                assert bits(many[i]) == bits(one_call)
    with pytest.raises(ValueError, match="dimensions"):
        dense.cosine_scores_chunked(matrix, np.ones((1, 5), np.float32))


def test_normalize_rows_in_chunks_and_in_place_equals_one_whole_matrix_call():
    rng = np.random.default_rng(1)
    matrix = rng.standard_normal((3000, 384)).astype(np.float32)
    matrix[[5, 2999]] = 0.0
    matrix[7] = -0.0
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    expected = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    assert bits(dense.normalize_rows(matrix)) == bits(expected)
    assert bits(dense.normalize_rows(matrix.copy(), chunk=100, in_place=True)) == bits(expected)


@pytest.mark.parametrize("size", [1, 3, 6, 7, 8, 600])
def test_window_means_equal_per_row_means_bit_for_bit(size):
    vectors = np.random.default_rng(size).standard_normal((size, 48)).astype(np.float32)
    expected = np.stack([vectors[list(w)].mean(axis=0) for w in chat_index._window_rows(size, 3)])
    assert bits(window_means(vectors, 3, chunk=64)) == bits(expected)
    norms = window_means(vectors, 3, chunk=64, norms_only=True)
    assert norms == pytest.approx(np.linalg.norm(expected, axis=1), rel=1e-6)


def test_spread_equals_the_two_key_sort():
    rng = np.random.default_rng(2)
    for trial in range(100):
        rows, groups = int(rng.integers(1, 400)), int(rng.integers(1, 40))
        group_of = rng.integers(-1, groups, rows)
        scores = np.round(rng.random(groups), 1).astype(np.float32) * (rng.random(groups) > 0.4)
        if trial % 2:  # cosines can be negative: the general path
            scores = scores - np.float32(0.3)
        if trial % 5 == 4:  # a NaN sorts as in the two-key sort (last)
            scores[int(rng.integers(0, groups))] = np.nan
        tie_break = rng.permutation(rows)
        kept = tie_break[group_of[tie_break] >= 0]
        expected = kept[np.lexsort((np.arange(kept.size), -scores[group_of[kept]]))]
        assert spread(scores, group_of, tie_break).tolist() == expected.tolist()


def test_neighbour_max_at_equals_neighbour_max_of_the_rows():
    rng = np.random.default_rng(3)
    for size in (1, 2, 3, 50):
        values = rng.standard_normal(size).astype(np.float32)  # negatives too: the ends differ
        sessions = np.sort(rng.integers(0, 4, size))
        rows = rng.permutation(size)
        for distance in (1, 2, 3):
            expected = neighbour_max(values, sessions, distance)[rows]
            got = neighbour_max_at(values.__getitem__, sessions, rows, distance)
            assert got.tolist() == expected.tolist()


def test_search_many_with_chunked_cosines_equals_single_searches(store, questions, monkeypatch):
    monkeypatch.setattr(chat_index, "CHUNKED_COSINES_FROM", 470)  # as for a big chat ...
    monkeypatch.setattr(chat_index, "COSINE_CHUNK", 64)  # ... Chat_1 (476 messages) in 8 stretches
    retriever = Retriever(store, HashEmbedder(), settings.load_config("retrieval"))
    assert retriever.chat(CHATS[0]).chunked_cosines and not retriever.chat(CHATS[2]).chunked_cosines  # 422
    for variant in ("hybrid_learned", "hybrid", "dense"):
        batch = retriever.search_many(CHATS[0], questions, k=16, variant=variant)
        for question, result in zip(questions, batch):
            assert snapshot(result) == snapshot(retriever.search(CHATS[0], question, k=16, variant=variant))


def test_big_chat_cosines_round_like_the_direct_ones(store, questions, monkeypatch):
    direct = Retriever(store, HashEmbedder()).chat(CHATS[0])
    monkeypatch.setattr(chat_index, "CHUNKED_COSINES_FROM", 470)
    monkeypatch.setattr(chat_index, "COSINE_CHUNK", 64)
    big = Retriever(store, HashEmbedder()).chat(CHATS[0])
    assert big.window_vectors is None and direct.window_vectors is not None
    qvecs = list(HashEmbedder().encode(questions))
    for batch, q, qvec in zip(chat_index.QueryScores.batch(big, questions, qvecs), questions, qvecs):
        alone, exact = chat_index.QueryScores(big, q, qvec), chat_index.QueryScores(direct, q, qvec)
        assert bits(batch.cosine) == bits(alone.cosine) and bits(batch.cosine_window) == bits(alone.cosine_window)
        assert np.abs(batch.cosine - exact.cosine).max() <= 1e-6
        assert np.abs(batch.cosine_window - exact.cosine_window).max() <= 1e-6


# -- the chat cache: bounded in bytes, least recently used out ---------------------------------------
def test_cache_keeps_chats_within_the_byte_bound_evicting_the_least_recently_used(store, questions):
    sizes = {name: Retriever(store, HashEmbedder()).chat(name).nbytes for name in CHATS}
    a, b, c = CHATS
    bound_mb = (sizes[a] + sizes[b] + sizes[c] - min(sizes.values()) / 2) / 2**20  # any two fit, not three
    retriever = Retriever(store, HashEmbedder(), cache_mb=bound_mb)
    before = {name: snapshot(retriever.search(name, questions[0], k=10)) for name in (a, b)}
    assert list(retriever.cache_info()["chats"]) == [a, b]
    retriever.search(c, questions[1], k=10)  # a is the least recently used: dropped
    info = retriever.cache_info()
    assert list(info["chats"]) == [b, c] and info["evictions"] == 1
    assert info["bytes"] == sizes[b] + sizes[c] <= info["max_bytes"]
    retriever.search(b, questions[2], k=10)  # b used: now c is the oldest
    assert list(retriever.cache_info()["chats"]) == [c, b]
    assert snapshot(retriever.search(a, questions[0], k=10)) == before[a]  # re-read, the same answer
    info = retriever.cache_info()
    assert list(info["chats"]) == [b, a] and info["loads"] == 4 and info["evictions"] == 2
    assert snapshot(retriever.search(b, questions[0], k=10)) == before[b]  # still cached
    assert retriever.cache_info()["loads"] == 4


def test_a_chat_larger_than_the_bound_still_answers_and_is_not_kept(store, questions):
    unbounded = Retriever(store, HashEmbedder())
    retriever = Retriever(store, HashEmbedder(), cache_mb=0.01)
    for question in questions[:3]:
        assert snapshot(retriever.search(CHATS[0], question, k=5)) == snapshot(
            unbounded.search(CHATS[0], question, k=5)
        )
    assert retriever.messages(CHATS[0], ["D1:1"])[0].local_id == "D1:1"
    info = retriever.cache_info()
    assert info["chats"] == {} and info["bytes"] == 0 and info["not_kept"] == info["loads"] == 4
    with pytest.raises(ValueError, match="cache.max_mb"):
        Retriever(store, HashEmbedder(), cache_mb=0)
    config = settings.load_config("retrieval")
    config["cache"] = {"max_mb": 0.01}
    assert Retriever(store, HashEmbedder(), config).cache.max_bytes == int(0.01 * 2**20)


def test_a_cached_chat_answers_while_another_one_loads(store, questions, monkeypatch):
    retriever = Retriever(store, HashEmbedder())
    retriever.chat(CHATS[0])
    entered, release = threading.Event(), threading.Event()
    read = store.messages_for

    def slow_read(chat_file):
        if chat_file == CHATS[1]:
            entered.set()
            release.wait(10)
        return read(chat_file)

    monkeypatch.setattr(store, "messages_for", slow_read)
    loader = threading.Thread(target=retriever.chat, args=(CHATS[1],))
    loader.start()
    try:
        assert entered.wait(10)
        started = time.monotonic()
        assert retriever.search(CHATS[0], questions[0], k=3).hits  # not behind the slow load
        assert time.monotonic() - started < 5
    finally:
        release.set()
        loader.join(10)
    assert set(retriever.cache_info()["chats"]) == {CHATS[0], CHATS[1]}


def test_invalidate_during_a_load_answers_but_does_not_keep_the_old_read(store, monkeypatch):
    retriever = Retriever(store, HashEmbedder())
    entered, release = threading.Event(), threading.Event()
    read = store.messages_for

    def slow_read(chat_file):
        entered.set()
        release.wait(10)
        return read(chat_file)

    monkeypatch.setattr(store, "messages_for", slow_read)
    got = []
    loader = threading.Thread(target=lambda: got.append(retriever.chat(CHATS[2])))
    loader.start()
    assert entered.wait(10)
    retriever.invalidate(CHATS[2])
    release.set()
    loader.join(10)
    assert got and got[0].chat_file == CHATS[2]
    assert retriever.cache_info()["chats"] == {}
