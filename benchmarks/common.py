"""What the RealTalk benchmarks share: the train chats (test chats refused), cached vectors, and
the embedder and index built by the resources as the asset graph builds them."""

from __future__ import annotations

import functools
import hashlib
import io
import json
import re
import socket
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np
import polars as pl

from narrative_mirror import embedding, onnx_embedding, schema, settings, split
from narrative_mirror.embedding import Embedder, message_texts
from narrative_mirror.index_rows import build_rows
from narrative_mirror.index_store import IndexStore
from narrative_mirror.layers import block_vectors, build_threads, build_topic_blocks, compute_signals
from resources import environment, runtime

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "datasets" / "realtalk"
TRAIN_FILE = re.compile(r"^Chat_[1-7]_")

# A benchmark is a process of its own: the library's folders (NM_HOME, NM_CONFIG_DIR) as the environment says.
environment.hand_to_library()


def build_embedder() -> Embedder:
    """The embedder of config/embedding.toml, as the ``embedder`` resource builds it."""
    return runtime.embedder()


class StaticInt8Embedder(Embedder):
    """The project's encode over an int8 model with static activation ranges
    (``onnx_embedding.export_static``): not a configurable backend, its calibration texts are a
    benchmark's."""

    def __init__(self, texts: list[str], onnx_cache: str, calibration: str = "minmax"):
        super().__init__(backend="onnx-int8", onnx_cache=onnx_cache)
        model_dir = embedding._model_path(self.model_name)
        path = onnx_embedding.export_static(model_dir, Path(onnx_cache), texts, calibration)
        self._static = onnx_embedding.OnnxEncoder(model_dir, path)
        self._name = f"onnx-{path.stem}"  # the calibration and its texts' hash

    @property
    def onnx(self):
        return self._static

    @property
    def fingerprint(self) -> str:
        return f"{self.model_name}:{self.dimension}:{self._name}"


def calibration_texts(texts: list[str], count: int = 256, seed: int = 0) -> list[str]:
    """``count`` of ``texts`` drawn at random, in their order: a static int8 model's calibration."""
    picked = np.random.default_rng(seed).choice(len(texts), min(count, len(texts)), replace=False)
    return [texts[i] for i in sorted(picked)]


def open_index(folder: Path) -> IndexStore:
    """The LanceDB index in ``folder``, opened as the ``lancedb`` resource opens one."""
    return runtime.index_store(str(folder))


def train_files(data_dir: Path) -> list[Path]:
    """Chat_1..Chat_7 of ``data_dir``; exits if one of them is assigned to the test split."""
    files = sorted(p for p in Path(data_dir).glob("*.json") if TRAIN_FILE.match(p.stem))
    for path in files:
        if split.assign(path.stem).split != split.TRAIN:
            raise SystemExit(f"{path.name} is a test chat: this benchmark runs on train chats only")
    if not files:
        raise SystemExit(f"no train chats (Chat_1..Chat_7) in {data_dir}")
    return files


def test_files(data_dir: Path) -> list[Path]:
    """The test split's chats of ``data_dir`` (Chat_8..Chat_10): to check a finished change, never
    to choose among variants."""
    files = sorted(p for p in Path(data_dir).glob("*.json") if split.assign(p.stem).split == split.TEST)
    if not files:
        raise SystemExit(f"no test chats in {data_dir}")
    return files


def message_vectors(messages: pl.DataFrame, embedder: Embedder, cache: Path | None) -> np.ndarray:
    """Vectors of ``message_texts(messages)``, kept in ``cache`` (keyed by model and texts)."""
    texts = message_texts(messages)
    if cache is None:
        return embedder.encode(texts)
    key = hashlib.sha256("\0".join([embedder.fingerprint, *texts]).encode()).hexdigest()[:20]
    path = Path(cache) / f"vectors_{key}.npy"
    if path.is_file():
        return np.load(path)
    vectors = embedder.encode(texts)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def index_chat(store: IndexStore, messages: pl.DataFrame, vectors: np.ndarray) -> None:
    """Build the chat's layers (config/layers.toml) and write it to ``store`` as the
    ``lancedb_index`` asset would."""
    config = settings.load_config("layers")
    blocks = build_topic_blocks(messages, vectors, config)
    signals = compute_signals(messages, blocks, config)
    threads = build_threads(blocks, signals, block_vectors(blocks, messages, vectors), config)
    embeddings = pl.DataFrame(
        {
            "message_id": messages["message_id"],
            "chat_file": messages["chat_file"],
            "local_id": messages["local_id"],
            "vector": list(vectors),
        },
        schema=schema.MESSAGE_EMBEDDINGS,
    )
    chat_file = messages["chat_file"][0]
    for table, rows in build_rows(messages, embeddings, signals=signals, blocks=blocks, threads=threads).items():
        store.replace_partition(table, chat_file, rows)


@functools.cache
def commit_tree(commit: str, paths: tuple[str, ...] = ("narrative_mirror",)) -> Path:
    """``commit``'s ``paths`` (the library by default; ``()``: the whole tree), extracted in a new folder."""
    tree = Path(tempfile.mkdtemp(prefix=f"nm_{commit}_"))
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, *paths], capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(tree, filter="data")
    return tree


def run_at_commit(commit: str, script: str, args: list[str]) -> list[dict]:
    """Run ``script`` (Python source) in ``commit``'s own ``narrative_mirror`` tree with ``args``;
    the JSON objects it prints, one per line. Lets a benchmark measure an earlier version beside
    today's, in the same run, on the same index."""
    tree = commit_tree(commit)
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{commit} failed:\n{proc.stderr[-3000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def latency_stats(seconds: list[float]) -> dict:
    """n, p50, p95 and max of durations in seconds, in ms."""
    ms = np.array(seconds) * 1000
    return {
        "n": len(seconds),
        "p50_ms": round(float(np.percentile(ms, 50)), 1),
        "p95_ms": round(float(np.percentile(ms, 95)), 1),
        "max_ms": round(float(ms.max()), 1),
    }
