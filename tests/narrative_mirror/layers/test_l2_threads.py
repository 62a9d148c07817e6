from __future__ import annotations

import copy
from datetime import datetime

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from narrative_mirror import schema
from narrative_mirror.layers import (
    ExtractiveSummarizer,
    block_vectors,
    build_threads,
    build_topic_blocks,
    compute_signals,
)
from narrative_mirror.layers.params import SummaryParams, section


@pytest.fixture(scope="module")
def story_layers(story, layers_config):
    messages, vectors = story
    blocks = build_topic_blocks(messages, vectors, layers_config)
    signals = compute_signals(messages, blocks, layers_config)
    return blocks, signals, block_vectors(blocks, messages, vectors)


def with_l2(config: dict, **values) -> dict:
    changed = copy.deepcopy(config)
    changed["l2"].update(values)
    return changed


def test_threads_link_storylines_across_sessions(story_layers, layers_config):
    blocks, signals, vectors = story_layers
    threads = build_threads(blocks, signals, vectors, layers_config)
    assert threads.schema == pl.Schema(schema.THREADS)
    assert threads["thread_id"].to_list() == ["chat_t/T0", "chat_t/T1"]
    assert threads["block_ids"].to_list() == [
        ["chat_t/S1/B0", "chat_t/S2/B0"],  # pasta: made, then the friend's sticky dough
        ["chat_t/S1/B1", "chat_t/S3/B0"],  # marathon: training, then the race
    ]
    assert threads["start_time"].to_list() == [datetime(2024, 5, 1, 9, 0), datetime(2024, 5, 1, 9, 6)]
    assert threads["end_time"].to_list() == [datetime(2024, 5, 2, 9, 4), datetime(2024, 5, 3, 9, 4)]
    assert threads["participants"].to_list() == [["Ana", "Ben"], ["Ana", "Ben"]]
    assert threads["entities"].to_list() == [[], ["boston"]]
    assert "pasta" in threads["title"][0] and "marathon" in threads["title"][1]
    label = dict(zip(blocks["block_id"], blocks["label"]))
    assert threads["summary"][1] == f"2024-05-01 {label['chat_t/S1/B1']} → 2024-05-03 {label['chat_t/S3/B0']}"


def test_unlinked_blocks_stay_outside_threads(story_layers, layers_config):
    blocks, signals, vectors = story_layers
    threads = build_threads(blocks, signals, vectors, layers_config)
    threaded = [b for ids in threads["block_ids"].to_list() for b in ids]
    assert len(threaded) == len(set(threaded))  # a block is in at most one thread
    assert set(blocks["block_id"]) - set(threaded) == {"chat_t/S1/B2", "chat_t/S2/B1", "chat_t/S3/B1"}


def test_threshold_entity_weight_and_min_sessions(story_layers, layers_config):
    blocks, signals, vectors = story_layers
    # The marathon blocks share the entity "boston" (Jaccard 1): with its bonus they pass 1.0;
    # the pasta blocks (no shared entity) do not, and neither does anything without the bonus.
    strict = build_threads(blocks, signals, vectors, with_l2(layers_config, link_threshold=1.0))
    assert strict["block_ids"].to_list() == [["chat_t/S1/B1", "chat_t/S3/B0"]]
    assert strict["thread_id"].to_list() == ["chat_t/T0"]
    no_entities = build_threads(blocks, signals, vectors, with_l2(layers_config, link_threshold=1.0, entity_weight=0.0))
    assert no_entities.height == 0 and no_entities.schema == pl.Schema(schema.THREADS)
    assert build_threads(blocks, signals, vectors, with_l2(layers_config, min_sessions=3)).height == 0


def test_threads_are_deterministic_and_independent_of_row_order(story_layers, layers_config):
    blocks, signals, vectors = story_layers
    threads = build_threads(blocks, signals, vectors, layers_config)
    assert_frame_equal(threads, build_threads(blocks, signals, vectors, layers_config))
    reversed_rows = list(range(blocks.height))[::-1]
    assert_frame_equal(threads, build_threads(blocks[reversed_rows], signals, vectors[reversed_rows], layers_config))


def test_summarizer_titles_threads(story_layers, layers_config):
    blocks, signals, vectors = story_layers
    summarizer = ExtractiveSummarizer(section(layers_config, "summary", SummaryParams))
    threads = build_threads(blocks, signals, vectors, layers_config, summarizer=summarizer)
    first, second = blocks.row(0, named=True), blocks.row(3, named=True)
    items = [f"2024-05-01 {first['label']}: {first['summary']}", f"2024-05-02 {second['label']}: {second['summary']}"]
    assert (threads["title"][0], threads["summary"][0]) == summarizer.summarize("thread", items)


def test_block_vectors_are_normalized_means(story, story_layers):
    messages, vectors = story
    blocks, _, block_vecs = story_layers
    assert block_vecs.shape == (7, 384) and block_vecs.dtype == np.float32
    mean = vectors[18:23].astype(np.float64).mean(axis=0)  # S2/B0 = positions 18..22
    np.testing.assert_allclose(block_vecs[3], mean / np.linalg.norm(mean), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(block_vecs, axis=1), 1.0, atol=1e-6)


def test_bad_inputs_are_named(story, story_layers, layers_config, make_blocks):
    messages, vectors = story
    blocks, signals, block_vecs = story_layers
    with pytest.raises(ValueError, match=r"block_vectors shape \(6, 384\) does not match 7 blocks"):
        build_threads(blocks, signals, block_vecs[:6], layers_config)
    with pytest.raises(ValueError, match=r"no signals for blocks \['chat_t/S3/B1'\]"):
        build_threads(blocks, signals.filter(pl.col("block_id") != "chat_t/S3/B1"), block_vecs, layers_config)
    with pytest.raises(ValueError, match=r"block_vectors: block chat_t/S1/B0 has messages not in the chat: \['D9:9'\]"):
        block_vectors(make_blocks(messages, [["D1:1"]]).with_columns(message_ids=pl.lit(["D9:9"])), messages, vectors)
    with pytest.raises(ValueError, match=r"layers\.toml: l2\.link_treshold: unknown setting"):
        config = copy.deepcopy(layers_config)
        config["l2"]["link_treshold"] = 0.5
        build_threads(blocks, signals, block_vecs, config)
