"""Many chats: N demo-size chats built by the command line's runner in a fresh NM_HOME.

Prints (JSON) the seconds per partition split into embedding / layers / ingest / index / the
rest (Dagster: planning, runs, events), the non-embedding share, the build against one bare
encode of the same texts, and the LanceDB tables before and after the maintenance job.
The query side (one ~45k-message chat against Chat_1 through `serve`) is
benchmarks/scale_queries.py.

    .venv/bin/python benchmarks/scale.py --chats 100
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAYER_STEPS = ("l1_topics", "l15_signals", "l2_threads")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chats", type=int, default=100)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="nm_scale_"))
    sys.path.insert(0, str(REPO))

    from cli.runner import Runner
    from cli.session import INGEST, LAYERS
    from narrative_mirror import settings
    from narrative_mirror.chats import load_chat
    from narrative_mirror.embedding import message_texts
    from resources import environment, runtime

    environment.set_for_process(environment.HOME_ENV, work / "home")

    demo = sorted(settings.DEMO_DATA_DIR.glob("*.json"))
    data = work / "chats"
    data.mkdir()
    for i in range(args.chats):
        shutil.copy(demo[i % len(demo)], data / f"chat_{i:04d}.json")
    texts = [t for p in sorted(data.glob("*.json")) for t in message_texts(load_chat(p).messages)]

    embedder = runtime.embedder()
    embedder.encode(texts[:64])  # load and warm up outside the timings
    started = time.perf_counter()
    embedder.model.encode(texts, batch_size=embedder.batch_size)
    bare = time.perf_counter() - started

    with Runner(data_dir=data, progress=lambda m: None) as runner:
        started = time.perf_counter()
        keys = runner.register()
        report = runner.materialize(INGEST + LAYERS, keys)
        build = time.perf_counter() - started
        store = runner.resources["lancedb"].get()
        started = time.perf_counter()
        maintained = store.maintain()  # health before and after
        maintain_s = time.perf_counter() - started
    steps = report.seconds
    parts = {
        "embedding": steps.get("message_embeddings", 0.0),
        "layers": sum(steps.get(s, 0.0) for s in LAYER_STEPS),
        "ingest": sum(steps.get(s, 0.0) for s in INGEST),
        "index": steps.get("lancedb_index", 0.0),
    }
    parts["dagster_and_planning"] = build - sum(parts.values())
    n = len(keys)
    print(
        json.dumps(
            {
                "chats": n,
                "messages": len(texts),
                "failed": sorted(str(k) for k in report.failed),
                "build_s": round(build, 2),
                "bare_encode_s": round(bare, 2),
                "build_vs_bare_encode": round(build / bare, 3),
                "seconds_per_partition": {k: round(v / n, 4) for k, v in parts.items()},
                "non_embedding_share": round(1 - parts["embedding"] / build, 3),
                "lancedb_before_maintenance": maintained["before"],
                "lancedb_after_maintenance": maintained["after"],
                "maintenance_s": round(maintain_s, 2),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            },
            indent=2,
        )
    )
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
