"""The embedder's backends and thread choice, quiet and under load, in one run.

Speed: the same RealTalk train texts encoded by torch with 1 thread, torch with all threads, the
project's torch encode (threads chosen from the free cores, ``embedding.threads_for_now``), and
ONNX Runtime fp32, int8 (dynamic, per-channel) and int8 static (calibrated on 256 train chat
texts, benchmarks/common.py) through the project's encode (``--encoders`` picks some); interleaved,
``--rounds`` rounds, median texts/s; first on the machine as it is ("quiet", its load average
printed), then with ``--load`` busy processes started by this script ("loaded"). Quality: each
ONNX variant's vectors against torch's (cosine) and dense recall@10 of the train questions over
their chat's messages (vectors only: the pipeline's fusion and rerank are not run here).

    .venv/bin/python benchmarks/embedding_backends.py --texts 600 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from common import DEFAULT_DATA, StaticInt8Embedder, calibration_texts, train_files

from narrative_mirror import embedding
from narrative_mirror.chats import load_chat
from narrative_mirror.embedding import Embedder, message_texts


def _spin() -> None:
    while True:
        pass


def _torch_fixed(embedder: Embedder, threads: int):
    import torch

    def encode(texts):
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            return embedder.model.encode(
                sorted(texts, key=len),
                batch_size=embedder.batch_size,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        finally:
            torch.set_num_threads(before)

    return encode


def speeds(encoders: dict, texts: list[str], rounds: int) -> dict[str, float]:
    runs: dict[str, list[float]] = {name: [] for name in encoders}
    for _ in range(rounds):
        for name, encode in encoders.items():
            started = time.perf_counter()
            encode(texts)
            runs[name].append(len(texts) / (time.perf_counter() - started))
    return {name: round(statistics.median(values), 1) for name, values in runs.items()}


def dense_recall(embedder: Embedder, chats: list, k: int = 10) -> tuple[float, int, np.ndarray]:
    """Mean recall@k of the train questions by message vectors alone; and all message vectors."""
    recalls, all_vectors = [], []
    for chat in chats:
        ids = chat.messages["local_id"].to_list()
        vectors = embedder.encode(message_texts(chat.messages))
        all_vectors.append(vectors)
        questions = [q for q in chat.qa if q.get("evidence")]
        asked = embedder.encode([q["question"] for q in questions])
        for q, vector in zip(questions, asked):
            top = {ids[i] for i in np.argsort(-(vectors @ vector))[:k]}
            gold = set(q["evidence"])
            recalls.append(len(gold & top) / len(gold))
    return round(float(np.mean(recalls)), 4), len(recalls), np.concatenate(all_vectors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--texts", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--load", type=int, default=2, help="busy processes for the loaded measurement")
    parser.add_argument("--no-recall", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--onnx-cache", default="", help="folder of exported models to reuse (default: a new one)")
    parser.add_argument("--encoders", default="", help="comma-separated names to time (default: all)")
    args = parser.parse_args()
    chats = [load_chat(path) for path in train_files(args.data)]
    every_text = [t for chat in chats for t in message_texts(chat.messages)]
    texts = every_text[: args.texts]
    cache = args.onnx_cache or tempfile.mkdtemp(prefix="nm-onnx-")
    torch_embedder = Embedder()
    onnx = {v: Embedder(backend=f"onnx-{v}", onnx_cache=cache) for v in ("fp32", "int8")}
    onnx["int8-static"] = StaticInt8Embedder(calibration_texts(every_text), cache)
    sizes = {"torch": os.path.getsize(Path(embedding._model_path(embedding.DEFAULT_MODEL)) / "model.safetensors")}
    for variant, embedder in onnx.items():
        sizes[f"onnx-{variant}"] = os.path.getsize(embedder.onnx.path)
    encoders = {
        "torch 1 thread": _torch_fixed(torch_embedder, 1),
        "torch all threads": _torch_fixed(torch_embedder, embedding.usable_cores()),
        "torch (project)": torch_embedder.encode,
        "onnx-fp32 (project)": onnx["fp32"].encode,
        "onnx-int8 (project)": onnx["int8"].encode,
        "onnx-int8-static (project)": onnx["int8-static"].encode,
    }
    if args.encoders:
        encoders = {name: encode for name, encode in encoders.items() if name in args.encoders.split(",")}
    for encode in encoders.values():  # warm: loaded models, sessions made
        encode(texts[:64])
    report: dict = {"texts": len(texts), "cores": embedding.usable_cores(), "model_bytes": sizes}
    report["quiet_loadavg"] = os.getloadavg()
    report["quiet"] = speeds(encoders, texts, args.rounds)
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.load)]
    for p in spinners:
        p.start()
    try:
        time.sleep(2)
        report["loaded_busy_elsewhere"] = round(embedding.busy_cores_elsewhere(0.5), 2)
        report["loaded"] = speeds(encoders, texts, args.rounds)
        report["loaded_loadavg"] = os.getloadavg()
    finally:
        for p in spinners:
            p.terminate()
    for condition in ("quiet", "loaded"):
        row = report[condition]
        if "torch 1 thread" in row and "torch all threads" in row:
            best = max(row["torch 1 thread"], row["torch all threads"])
            report[f"{condition}_ratio_torch_project_to_best_fixed"] = round(row["torch (project)"] / best, 3)
        if "torch (project)" in row:
            report[f"{condition}_ratio_to_torch_project"] = {
                name: round(value / row["torch (project)"], 3) for name, value in row.items()
            }
    if not args.no_recall:
        recall, questions, reference = dense_recall(torch_embedder, chats)
        report["dense_recall@10"] = {"torch": recall, "questions": questions}
        for variant, embedder in onnx.items():
            recall, _, vectors = dense_recall(embedder, chats)
            cosines = (vectors * reference).sum(axis=1)
            report["dense_recall@10"][f"onnx-{variant}"] = recall
            report[f"cosine_to_torch onnx-{variant}"] = {
                "mean": round(float(cosines.mean()), 5),
                "p1": round(float(np.percentile(cosines, 1)), 5),
                "min": round(float(cosines.min()), 5),
            }
    print(json.dumps(report, indent=1))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
