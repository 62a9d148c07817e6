"""Build benchmark: materialize every layer for the RealTalk chats through Dagster and compare
with one bare encode (the embedder's model) of the same message texts in the same process.

    .venv/bin/python benchmarks/build_layers.py [--data ../shared/datasets/realtalk] [--repeats N]

Prints wall seconds per asset, the embedding step / bare encode ratio (target <= 1.1) and the
whole build / bare encode ratio (target <= 1.3). Each build uses a fresh NM_HOME in a temp folder.

Bare encodes and builds alternate (bare, build, bare, build, ..., bare) and each build is
compared with the mean of the encodes beside it: on this shared 2-core VM the same encode varies
by up to 30% between minutes. With --repeats N > 1 the report lists every build and the medians.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "datasets" / "realtalk")
    parser.add_argument("--repeats", type=int, default=1, help="builds to run, each in a fresh NM_HOME")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    sys.path.insert(0, str(REPO))

    from cli.runner import Runner
    from cli.session import INGEST, LAYERS
    from narrative_mirror.chats import load_chat
    from narrative_mirror.embedding import message_texts
    from narrative_mirror.keys import find_chat_files
    from resources import environment, runtime

    environment.set_for_process(environment.HOME_ENV, tempfile.mkdtemp(prefix="nm_bench_"))

    files, _ = find_chat_files(args.data)
    texts = [t for path in files.values() for t in message_texts(load_chat(path).messages)]
    embedder = runtime.embedder()
    model = embedder.model
    model.encode(texts[:64], batch_size=embedder.batch_size)  # load and warm up, outside both timings
    # Imports stay outside the timings too, as the model load does (a process pays them once):
    # constructing the Runner imports Dagster and the asset modules; the assets import these lazily.
    for module in (
        "narrative_mirror.index_store",
        "narrative_mirror.llm",
        "narrative_mirror.layers.l1_topics",
        "narrative_mirror.layers.l15_signals",
        "narrative_mirror.layers.l2_threads",
        "narrative_mirror.layers.summarize",
    ):
        importlib.import_module(module)

    def bare_encode() -> float:
        started = time.perf_counter()
        model.encode(texts, batch_size=embedder.batch_size)
        return time.perf_counter() - started

    def build() -> tuple[dict[str, float], float]:
        environment.set_for_process(environment.HOME_ENV, tempfile.mkdtemp(prefix="nm_bench_"))
        with Runner(data_dir=args.data, progress=lambda m: None) as runner:
            keys = runner.register()
            started = time.perf_counter()
            report = runner.materialize(INGEST + LAYERS, keys)
            total = time.perf_counter() - started
        return report.seconds, total

    builds = []
    bare_before = bare_encode()
    for _ in range(args.repeats):
        seconds, total = build()
        bare_after = bare_encode()
        bare = (bare_before + bare_after) / 2
        builds.append(
            {
                "bare_encode_s": {
                    "before": round(bare_before, 2),
                    "after": round(bare_after, 2),
                    "mean": round(bare, 2),
                },
                "seconds_per_asset": {k: round(v, 2) for k, v in seconds.items()},
                "build_wall_s": round(total, 2),
                "embedding_step_vs_bare_encode": round(seconds["message_embeddings"] / bare, 3),
                "build_vs_bare_encode": round(total / bare, 3),
            }
        )
        bare_before = bare_after

    def median(key: str) -> float:
        return round(statistics.median(b[key] for b in builds), 3)

    summary = (
        builds[0]
        if len(builds) == 1
        else {
            "builds": builds,
            "median_embedding_step_vs_bare_encode": median("embedding_step_vs_bare_encode"),
            "median_build_vs_bare_encode": median("build_vs_bare_encode"),
        }
    )
    report = {"chat_files": len(files), "messages": len(texts), **summary}
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
