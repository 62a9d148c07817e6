import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from index_frames import DIM, TEXTS, chat_frames

from narrative_mirror.index_rows import block_rows, build_rows, message_rows, thread_rows


def test_message_rows_text_signals_and_vectors():
    messages, embeddings, blocks, signals, threads = chat_frames("chat_a", TEXTS)
    rows = message_rows(messages, embeddings, signals)
    assert rows.num_rows == 4
    assert rows.column("text").to_pylist() == [
        "A: hello there",
        "B: look at my bike [image: a red bike]",
        "A: nice bike",
        "B: thanks",
    ]
    assert rows.column("raw_text").to_pylist() == TEXTS
    assert rows.column("block_id").to_pylist() == ["chat_a/S1/B0", "chat_a/S1/B0", "chat_a/S1/B1", "chat_a/S1/B1"]
    assert rows.column("refs").to_pylist() == [0.0, 0.0, 0.5, 0.0]
    assert rows.column("importance_tier").to_pylist() == [3, 1, 1, 1]
    assert rows.column("entities").to_pylist() == [[], ["bike"], [], []]
    assert rows.schema.field("vector").type == pa.list_(pa.float32(), DIM)
    assert rows.column("vector").to_pylist()[1] == [0.0, 1.0, 0.0, 0.0]
    # without signals: defaults, no block
    bare = message_rows(messages, embeddings)
    assert bare.column("block_id").to_pylist() == [None] * 4
    assert bare.column("refs").to_pylist() == [0.0] * 4


def test_block_and_thread_vectors_are_normalized_member_means():
    messages, embeddings, blocks, signals, threads = chat_frames("chat_a", TEXTS)
    brows = block_rows(blocks, embeddings)
    h = 1 / np.sqrt(2)
    assert np.allclose(brows.column("vector").to_pylist(), [[h, h, 0, 0], [0, 0, h, h]])
    assert brows.column("message_ids").to_pylist() == [["D1:1", "D1:2"], ["D1:3", "D1:4"]]
    assert brows.column("text").to_pylist() == ["label 0 summary 0 kw", "label 1 summary 1 kw"]
    trows = thread_rows(threads, blocks, embeddings)
    assert np.allclose(trows.column("vector").to_pylist(), [[0.5, 0.5, 0.5, 0.5]])
    assert trows.column("text").to_pylist() == ["Bikes. About bikes"]


def test_build_rows_errors_name_the_problem():
    messages, embeddings, blocks, signals, threads = chat_frames("chat_a", TEXTS)
    with pytest.raises(ValueError, match=r"no vector for 1 messages, e.g. \['chat_a/D1:4'\]"):
        message_rows(messages, embeddings.head(3))
    with pytest.raises(ValueError, match="messages: missing columns \\['speaker'\\]"):
        message_rows(messages.drop("speaker"), embeddings)
    with pytest.raises(ValueError, match="threads given without their blocks"):
        build_rows(messages, embeddings, threads=threads)
    bad_thread = threads.with_columns(pl.lit(["chat_a/S1/B9"]).alias("block_ids"))
    with pytest.raises(ValueError, match=r"thread chat_a/T0: unknown block ids \['chat_a/S1/B9'\]"):
        thread_rows(bad_thread, blocks, embeddings)
