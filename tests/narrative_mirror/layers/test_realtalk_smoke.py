"""The three layers on one real RealTalk TRAIN chat: coverage and shape hold, counts printed."""

from __future__ import annotations

import time

import numpy as np
import polars as pl
import pytest

from narrative_mirror.chats import load_chat
from narrative_mirror.layers import block_signals, block_vectors, build_threads, build_topic_blocks, compute_signals

TRAIN_CHAT = "Chat_4_Emi_Paola"
SESSIONS = 8  # the first sessions only (~170 messages): encoding is the slow part on shared CPUs


def test_layers_on_a_realtalk_train_chat(realtalk_dir, embedder, layers_config):
    path = realtalk_dir / f"{TRAIN_CHAT}.json"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    messages = load_chat(path).messages.filter(pl.col("session") <= SESSIONS)
    vectors = embedder.encode([f"{s}: {t}" for s, t in zip(messages["speaker"], messages["text"])])

    start = time.perf_counter()
    blocks = build_topic_blocks(messages, vectors, layers_config)
    signals = compute_signals(messages, blocks, layers_config)
    threads = build_threads(blocks, signals, block_vectors(blocks, messages, vectors), layers_config)
    seconds = time.perf_counter() - start
    sizes = blocks["message_ids"].list.len()
    print(
        f"\n{TRAIN_CHAT}: {messages.height} messages, {messages['session'].n_unique()} sessions -> "
        f"{blocks.height} blocks (size {sizes.min()}..{sizes.max()}, mean {sizes.mean():.1f}), "
        f"{threads.height} threads (blocks per thread {threads['block_ids'].list.len().to_list()}), "
        f"tiers {signals['importance_tier'].value_counts().sort('importance_tier').rows()}, {seconds:.2f} s"
    )

    # Every message in exactly one block, in file order; blocks stay inside their session.
    assert [i for ids in blocks["message_ids"].to_list() for i in ids] == messages["local_id"].to_list()
    session_of = dict(zip(messages["local_id"], messages["session"]))
    assert all({session_of[i] for i in ids} == {s} for s, ids in zip(blocks["session"], blocks["message_ids"]))
    assert sizes.max() <= layers_config["l1"]["max_block_messages"]
    assert blocks["block_index"].to_list() == list(range(blocks.height))
    assert blocks["block_id"].n_unique() == blocks.height
    assert (blocks["label"].str.len_chars() > 0).all() and (blocks["summary"].str.len_chars() > 0).all()
    # Signals: one row per message; refs point backwards only.
    assert signals["local_id"].to_list() == messages["local_id"].to_list()
    index_of = dict(zip(blocks["block_id"], blocks["block_index"]))
    for own, refs in zip(signals["block_id"], signals["ref_block_ids"]):
        assert all(index_of[r] < index_of[own] for r in refs)
    assert set(signals["importance_tier"].unique()) <= {0, 1, 2, 3}
    assert block_signals(signals).height == blocks.height
    # Threads: time-ordered, disjoint, each spanning >= min_sessions sessions.
    threaded = [b for ids in threads["block_ids"].to_list() for b in ids]
    assert len(threaded) == len(set(threaded))
    session_of_block = dict(zip(blocks["block_id"], blocks["session"]))
    for ids in threads["block_ids"].to_list():
        assert [index_of[b] for b in ids] == sorted(index_of[b] for b in ids)
        assert len({session_of_block[b] for b in ids}) >= layers_config["l2"]["min_sessions"]
    assert threads.height >= 1
    assert np.isfinite(signals["sentiment"].to_numpy()).all()
    # Vectors are given: the three layers themselves must stay cheap (generous bound: shared CPUs).
    assert seconds < 5
