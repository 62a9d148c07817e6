"""The embedder's backends through the whole retrieval: leave-one-chat-out pipeline recall@10 on
the RealTalk TRAIN chats (Chat_1..Chat_7), the measure docs/decisions.md's adoption rule asks for.

Each backend (torch; ONNX Runtime fp32, int8 dynamic, int8 static calibrated on train chat texts)
encodes the 7 chats' messages; the chats are layered (blocks and threads take their vectors from
the messages') and indexed, every category 1-3 question's candidate pool is collected with the
backend's query vectors, and the learned fusion (the default variant) is re-fitted per fold on the
other six chats and scores the seventh (benchmarks/adapted_embedder.py's ``measure``). Message
vectors are cached per backend in ``--cache`` (a run that stops resumes). Speed is not measured
here (benchmarks/embedding_backends.py does, interleaved, quiet and loaded).

    nice -n 5 .venv/bin/python benchmarks/embedding_pipeline.py [--backends torch,onnx-int8,...] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from adapted_embedder import load_chats, measure
from common import DEFAULT_DATA, StaticInt8Embedder, calibration_texts

from narrative_mirror import onnx_embedding, settings
from narrative_mirror.embedding import Embedder, message_texts
from narrative_mirror.retrieval.learned_fusion import LearnedFusion

BACKENDS = ("torch", "onnx-fp32", "onnx-int8", "onnx-int8-static")


def embedder_for(backend: str, cache: Path, chats, calibration: str, seed: int = 0) -> Embedder:
    onnx_cache = str(cache / "onnx")
    if backend != "onnx-int8-static":
        return Embedder(backend=backend, onnx_cache=onnx_cache)
    texts = [t for _, messages, _ in chats for t in message_texts(messages)]  # texts only: no questions, no gold
    return StaticInt8Embedder(calibration_texts(texts, seed=seed), onnx_cache, calibration)


def cached_vectors(embedder: Embedder, chats, cache: Path) -> tuple[list[np.ndarray], float]:
    """Each chat's message vectors (from ``cache`` when an earlier run saved them) and the encode's seconds."""
    path = cache / f"{embedder.fingerprint.replace(':', '_')}.npz"
    if path.exists():
        saved = np.load(path)
        return [saved[chat_file] for chat_file, _, _ in chats], float(saved["__seconds"])
    started = time.perf_counter()
    vectors = [embedder.encode(message_texts(messages)) for _, messages, _ in chats]
    seconds = time.perf_counter() - started
    np.savez(path, __seconds=seconds, **{chat_file: v for (chat_file, _, _), v in zip(chats, vectors)})
    return vectors, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--calibration", default="minmax", choices=onnx_embedding.CALIBRATIONS)
    parser.add_argument("--calibration-seed", type=int, default=0, help="which 256 train texts calibrate")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "nm-embedding-pipeline")
    parser.add_argument("--l2", type=float, default=1e-3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    config = settings.load_config("retrieval")
    shipped = LearnedFusion.from_config(config["learned"])
    chats = load_chats(args.data)
    results = {}
    for backend in args.backends.split(","):
        embedder = embedder_for(backend, args.cache, chats, args.calibration, args.calibration_seed)
        vectors, seconds = cached_vectors(embedder, chats, args.cache)
        # torch's vectors as they are cached (encoded first when this run measures torch too)
        reference = np.concatenate(cached_vectors(Embedder(), chats, args.cache)[0])
        cosines = (np.concatenate(vectors) * reference).sum(axis=1)
        with tempfile.TemporaryDirectory(prefix="nm_backend_") as folder:
            run = measure(embedder, chats, vectors, config, shipped, args.l2, "", Path(folder), Path(folder))
        row = {
            "fingerprint": embedder.fingerprint,
            "questions": int(len(run["pipeline"])),
            "encode_seconds": round(seconds, 1),
            "cosine_to_torch": {
                "mean": round(float(cosines.mean()), 4),
                "p1": round(float(np.percentile(cosines, 1)), 4),
            },
        }
        for measure_name in ("dense", "hybrid", "pool_recall", "pipeline", "shipped_fusion"):
            row[measure_name] = round(float(run[measure_name].mean()), 4)
        row["pipeline_per_chat"] = [
            round(float(run["pipeline"][run["chat_of"] == i].mean()), 4) for i in range(len(chats))
        ]
        results[backend] = row
        print(json.dumps({backend: row}), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
