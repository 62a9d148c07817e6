"""Distributed build benchmark: the demo chats' memory (ingest, layers, LanceDB index) built by two
Celery workers versus in-process, timed in one run on this machine.

    .venv/bin/python benchmarks/distributed_build.py [--data DIR] [--repeats N] [--workers 2]

Needs the local servers of the `services` tests (PostgreSQL, Redis, the S3-compatible server):
started by scripts/services.sh when not running, and then stopped at the end. Uses their helpers
(tests/services/nm_services.py: databases, buckets, workers). Three builds of the
same chats, each from scratch (fresh NM_HOME, database, bucket):

1. in-process, one machine: `narrative-mirror build` (SQLite instance, LanceDB in NM_HOME);
2. in-process, shared state: the same command on the PostgreSQL instance with the index on S3;
3. distributed: one run per chat launched at once (`dagster asset materialize`, as the daemon
   launches runs), every step sent through Redis to N Celery workers (scripts/worker.sh), on the
   same PostgreSQL instance and S3 index. The workers are started and warmed up (one small step
   each, which imports the code) before the clock starts, as long-lived workers are.

Each build is timed wall-clock from the command's start to its end (process start-up included:
a run's own process starts per run in a deployment too). Prints the seconds, the step seconds
summed from the instance, where the steps ran, and distributed / in-process ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "services")]

import nm_services as svc  # noqa: E402

from cli.session import INGEST, LAYERS  # noqa: E402
from narrative_mirror import settings  # noqa: E402
from narrative_mirror.home import Home

MEMORY = INGEST + LAYERS
TIMEOUT_S = 900


def step_report(env: dict[str, str]) -> dict:
    """Step seconds summed over the instance's runs, and how many steps each process ran."""
    import dagster as dg

    seconds, pids = 0.0, {}
    with svc.instance_of(env) as instance:
        for r in instance.get_runs():
            for rec in instance.get_records_for_run(r.run_id, of_type=dg.DagsterEventType.STEP_SUCCESS).records:
                event = rec.event_log_entry.dagster_event
                seconds += event.event_specific_data.duration_ms / 1000
                pids[event.pid] = pids.get(event.pid, 0) + 1
    return {"step_seconds": round(seconds, 2), "steps_by_process": pids}


def build_in_process(data: Path, root: Path, shared: dict[str, str] | None) -> dict:
    env = svc.clean_env(NM_HOME=str(root / "home"), **(shared or {}))
    started = time.perf_counter()
    svc.cli(["build", "--data", str(data)], env, timeout_s=TIMEOUT_S)
    seconds = time.perf_counter() - started
    return {"seconds": round(seconds, 2), **(step_report(env) if shared else {})}


def materialize_all(env: dict[str, str], keys: list[str], select: list[str]) -> float:
    """One run per partition, launched at once (as the daemon launches them); seconds until all ended."""
    started = time.perf_counter()
    svc.materialize(
        env,
        [["-m", "definitions", "--select", ",".join(select), "--partition", key] for key in keys],
        timeout_s=TIMEOUT_S,
    )
    return time.perf_counter() - started


def build_distributed(data: Path, root: Path, shared: dict[str, str], broker: str, workers: int) -> dict:
    import redis

    from narrative_mirror.keys import find_chat_files

    redis.Redis.from_url(broker).flushdb()
    home = root / "home"
    env = svc.clean_env(
        NM_HOME=str(home),
        DAGSTER_HOME=str(Home(home).instance),
        NM_DATA_DIR=str(data),
        NM_CELERY_BROKER_URL=broker,
        **shared,
    )
    keys = sorted(find_chat_files(data)[0])
    with svc.instance_of(env) as instance:
        instance.add_dynamic_partitions("chat_files", keys)
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    pool = svc.Workers(env, root, count=workers)
    try:
        ready = time.perf_counter() - started
        # Warm-up outside the clock: one small step per worker (imports the code, as a
        # long-lived worker has). `split` is re-materialized by the timed build anyway.
        warm = materialize_all(env, keys[:workers], ["split"])
        seconds = materialize_all(env, keys, MEMORY)
    finally:
        pool.stop()
    report = step_report(env)
    in_workers = sum(n for pid, n in report["steps_by_process"].items() if pid in pool.pids)
    return {
        "seconds": round(seconds, 2),
        "workers_ready_seconds": round(ready, 2),
        "warm_up_seconds": round(warm, 2),
        **report,
        "steps_in_workers": in_workers,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=settings.DEMO_DATA_DIR)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    started_here = svc.start_services()
    found = svc.find_services()
    results: dict[str, list[dict]] = {"in_process_one_machine": [], "in_process_shared_state": [], "distributed": []}
    try:
        for repeat in range(args.repeats):
            with tempfile.TemporaryDirectory(prefix="nm_dist_bench_") as tmp:
                tmp = Path(tmp)
                data = tmp / "data"
                shutil.copytree(args.data, data)
                arcs = settings.default_arcs_dir(args.data)
                for arc in arcs.glob("*.arcs.json") if arcs not in (None, args.data) else []:
                    shutil.copy(arc, data / arc.name)

                def shared() -> dict[str, str]:
                    return {
                        "NM_DAGSTER_PG_URL": svc.create_database(found),
                        **svc.s3_env(found, svc.create_bucket(found)),
                    }

                one = build_in_process(data, tmp / "one", None)
                results["in_process_one_machine"].append(one)
                print(f"[{repeat + 1}] in-process, one machine: {one}", flush=True)
                state = shared()
                local = build_in_process(data, tmp / "local", state)
                svc.drop_database(found, state["NM_DAGSTER_PG_URL"])
                results["in_process_shared_state"].append(local)
                print(f"[{repeat + 1}] in-process, PostgreSQL + S3: {local}", flush=True)
                state = shared()
                broker = found.redis_url.rsplit("/", 1)[0] + "/2"
                dist = build_distributed(data, tmp / "dist", state, broker, args.workers)
                svc.drop_database(found, state["NM_DAGSTER_PG_URL"])
                results["distributed"].append(dist)
                print(f"[{repeat + 1}] {args.workers} Celery workers, PostgreSQL + S3: {dist}", flush=True)
    finally:
        if started_here:
            svc.stop_services()

    def median(name: str) -> float:
        return statistics.median(r["seconds"] for r in results[name])

    summary = {
        "chats": len([p for p in args.data.glob("*.json") if not p.name.endswith(".arcs.json")]),
        "cpus": os.cpu_count(),
        "workers": args.workers,
        "repeats": args.repeats,
        **{f"{name}_seconds": median(name) for name in results},
        "distributed_vs_in_process_one_machine": round(median("distributed") / median("in_process_one_machine"), 2),
        "distributed_vs_in_process_shared_state": round(median("distributed") / median("in_process_shared_state"), 2),
    }
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
