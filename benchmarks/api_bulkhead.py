"""Bulkheads of the HTTP API under a hung LLM: do searches stay fast while asks wait, and does
every ask end by its deadline?

Indexes the tiny chat of ``tests/memory_api_chat.py`` in a LanceDB folder (reused when it holds
it already), serves the API with uvicorn on a free loopback port with an LLM that never answers
(``tests/llm_servers.fault_server("hang")``; the client would wait its full 30 s), then:

1. idle: ``--idle`` sequential searches -> p50/p95;
2. storm: ``--asks`` concurrent ``POST /api/ask`` (profile ``--profile``, its real deadline unless
   ``--deadline``), and while they are in flight ``--searches`` searches from two threads, spread
   over the deadline -> search p50/p95/max during the storm, against idle (ratio, difference);
   every ask's latency against its deadline and why it degraded.

Prints one JSON object. Server and client share this process (and the 2 cores); the client's
overhead is in the idle numbers as well.

    .venv/bin/python benchmarks/api_bulkhead.py [--deadline S] [--asks 45] [--searches 200]
        [--llm-workers 4] [--llm-queue 16] [--ask-workers 2] [--search-workers 8] [--store DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for folder in (REPO, REPO / "tests"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import httpx  # noqa: E402
import uvicorn  # noqa: E402
from common import build_embedder, free_port, latency_stats, open_index  # noqa: E402
from llm_servers import fault_server  # noqa: E402
from memory_api_chat import CHAT, build_retriever  # noqa: E402

from api.app import create_app  # noqa: E402
from narrative_mirror.agent.profiles import PROFILES  # noqa: E402
from narrative_mirror.events.writer import EventLog  # noqa: E402
from narrative_mirror.llm import LLMClient  # noqa: E402
from narrative_mirror.retrieval.engine import Retriever  # noqa: E402

QUERIES = ["rye bread at the bakery", "marathon training", "new job", "long run on Sunday", "sourdough"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="balanced", choices=sorted(PROFILES))
    parser.add_argument("--deadline", type=float, help="override the profile's deadline_s (seconds)")
    parser.add_argument("--asks", type=int, default=45)
    parser.add_argument("--searches", type=int, default=200, help="searches during the storm")
    parser.add_argument("--idle", type=int, default=100, help="searches before the storm")
    parser.add_argument("--llm-workers", type=int, default=4)
    parser.add_argument("--llm-queue", type=int, default=16)
    parser.add_argument("--ask-workers", type=int, default=2, help="threads of the offline-ask pool")
    parser.add_argument("--search-workers", type=int, default=8, help="threads of the search pool")
    parser.add_argument("--store", type=Path, default=Path(tempfile.gettempdir()) / "nm_api_bulkhead")
    args = parser.parse_args(argv)
    deadline = args.deadline or PROFILES[args.profile].deadline_s

    embedder = build_embedder()
    uri = args.store / "lancedb"
    store = open_index(uri)
    retriever = Retriever(store, embedder) if CHAT in store.chat_files() else build_retriever(uri, embedder)
    work = Path(tempfile.mkdtemp(prefix="api_bulkhead_"))
    event_log = EventLog(work / "events")

    with fault_server("hang") as llm_server:
        llm = LLMClient(llm_server.settings(timeout_s=30.0, max_retries=0))
        app = create_app(
            retriever,
            event_log,
            llm,
            runs_root=work / "recall_runs",
            deadlines={args.profile: deadline} if args.deadline else None,
            llm_workers=args.llm_workers,
            llm_queue=args.llm_queue,
            ask_workers=args.ask_workers,
            search_workers=args.search_workers,
        )
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        base = f"http://127.0.0.1:{port}"
        limits = httpx.Limits(max_connections=args.asks + 10, max_keepalive_connections=args.asks + 10)
        with httpx.Client(base_url=base, timeout=deadline + 60, limits=limits) as client:

            def search(i: int) -> float:
                started = time.monotonic()
                response = client.get("/api/memory/search", params={"q": QUERIES[i % 5], "chat": CHAT, "k": 5})
                response.raise_for_status()
                return time.monotonic() - started

            for i in range(10):  # warm up: models, caches, connections
                search(i)
            idle = [search(i) for i in range(args.idle)]

            def ask(i: int) -> dict:
                started = time.monotonic()
                response = client.post(
                    "/api/ask",
                    json={
                        "chat": CHAT,
                        "question": "Where does Ana work?",
                        "profile": args.profile,
                        "user_id": f"storm{i}",
                    },
                )
                elapsed = time.monotonic() - started
                body = response.json()
                return {
                    "status": response.status_code,
                    "latency_s": round(elapsed, 3),
                    "over_deadline_s": round(elapsed - deadline, 3),
                    "degraded": body.get("degraded"),
                    "reason": body.get("degraded_reason"),
                    "event_id": response.headers.get("X-Retrieval-Event-Id"),
                }

            during: list[float] = []
            lock = threading.Lock()
            pause = deadline / max(1, args.searches // 2)

            def searcher(offset: int) -> None:
                for i in range(offset, args.searches, 2):
                    latency = search(i)
                    with lock:
                        during.append(latency)
                    time.sleep(max(0.0, pause - latency))

            storm_started = time.monotonic()
            with ThreadPoolExecutor(max_workers=args.asks + 2) as pool:
                asks = [pool.submit(ask, i) for i in range(args.asks)]
                time.sleep(0.2)  # the asks are in
                searchers = [pool.submit(searcher, offset) for offset in (0, 1)]
                results = [future.result() for future in asks]
                storm_s = time.monotonic() - storm_started
                for future in searchers:
                    future.result()
            pool_state = {"running": app.state.api.llm_pool.running, "waiting": app.state.api.llm_pool.waiting}
        server.should_exit = True
        thread.join(timeout=30)
    event_log.flush()
    stored = event_log.events()
    storm_ids = stored.filter(stored["user_id"].str.starts_with("storm"))["event_id"].to_list()
    event_log.close()

    idle_stats, storm_stats = latency_stats(idle), latency_stats(during)
    latencies = [r["latency_s"] for r in results]
    report = {
        "profile": args.profile,
        "deadline_s": deadline,
        "asks": args.asks,
        "llm_workers": args.llm_workers,
        "llm_queue": args.llm_queue,
        "ask_workers": args.ask_workers,
        "search_workers": args.search_workers,
        "llm_requests_received": len(llm_server.chat_requests),
        "search_idle": idle_stats,
        "search_during_storm": storm_stats,
        "p95_ratio": round(storm_stats["p95_ms"] / idle_stats["p95_ms"], 2),
        "p95_difference_ms": round(storm_stats["p95_ms"] - idle_stats["p95_ms"], 1),
        "storm_wall_s": round(storm_s, 2),
        "ask_status": dict(Counter(r["status"] for r in results)),
        "asks_degraded": sum(bool(r["degraded"]) for r in results),
        "degraded_reasons": dict(Counter(r["reason"] for r in results)),
        "asks_within_deadline": sum(r["over_deadline_s"] <= 0 for r in results),
        "asks_within_deadline_plus_0.5s": sum(r["over_deadline_s"] <= 0.5 for r in results),
        "ask_latency_s": {
            "min": min(latencies),
            "max": max(latencies),
            "max_over_deadline": round(max(latencies) - deadline, 3),
        },
        "ask_events_stored": len(storm_ids),
        "ask_events_match_responses": sorted(storm_ids) == sorted(r["event_id"] for r in results),
        "llm_pool_after": pool_state,
        "ask_results": [{k: r[k] for k in ("latency_s", "over_deadline_s", "reason")} for r in results],
    }
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
