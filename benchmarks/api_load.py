"""The HTTP API under load, today's code beside an earlier commit's, in the same run: one token's
flood of searches against another token's searches and health checks, then the server's memory
over many distinct searches.

For each version (``--before`` commit, default the merge base with main, then the working tree)
a server process serves the tiny chat of ``tests/memory_api_chat.py`` with two tokens, and a client
(this process, never sharing the server's interpreter lock):

1. ``tests/api/flood.py``: token B's search and health latencies idle, then while token A sends
   ``--flood`` searches, one every ``--every`` seconds, each on its own connection: B's p95 during
   against idle, health p95/max during, A's statuses (429s and their Retry-After);
2. ``--searches`` distinct searches by B (4 client threads, user ids cycling over 50), the server's
   RSS every ``--step`` searches, and the recall-run files left.

Prints one JSON object.

    .venv/bin/python benchmarks/api_load.py [--before COMMIT] [--flood 300] [--every 0.01]
        [--searches 600] [--step 100] [--store DIR] [--pin]
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlencode

REPO = Path(__file__).resolve().parents[1]
for folder in (REPO, REPO / "tests", REPO / "tests" / "api"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import flood  # noqa: E402
from common import free_port  # noqa: E402
from memory_api_chat import CHAT  # noqa: E402

from api.access import add_token  # noqa: E402
from resources import environment  # noqa: E402

SERVER = """
import os, sys
from pathlib import Path
port, tokens, store, work = sys.argv[1:5]
os.environ["NM_HOME"] = work
from resources import environment
environment.hand_to_library()
import uvicorn
from memory_api_chat import CHAT, build_retriever
from api.access import load_tokens
from api.app import create_app
from api.readiness import warm_up
from narrative_mirror.embedding import Embedder
from narrative_mirror.events.writer import EventLog
from narrative_mirror.index_store import IndexStore
from narrative_mirror.retrieval.engine import Retriever
embedder = Embedder()
uri = Path(store) / "lancedb"
retriever = Retriever(IndexStore(str(uri)), embedder) if uri.exists() else build_retriever(uri, embedder)
app = create_app(retriever, EventLog(Path(work) / "events", embedder=embedder), runs_root=Path(work) / "recall_runs",
                 tokens=load_tokens(tokens), warm_up=lambda: warm_up(retriever, [CHAT]))
uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning")
"""
TREE = ("api", "narrative_mirror", "resources", "tests/memory_api_chat.py")
WORDS = "rye bread bakery marathon job sunday loaf run legs morning training week forty elm street luck".split()


def tree_at(commit: str) -> Path:
    """The server's packages at ``commit``, extracted to a temporary folder."""
    tree = Path(tempfile.mkdtemp(prefix=f"nm_api_{commit[:8]}_"))
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, *TREE], capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(tree, filter="data")
    return tree


def rss_mb(pid: int) -> float:
    return round(int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)


def stats(seconds: list[float]) -> dict:
    ms = sorted(s * 1000 for s in seconds)
    if not ms:
        return {"n": 0}
    p95 = statistics.quantiles(ms, n=20)[-1] if len(ms) > 1 else ms[0]
    return {
        "n": len(ms),
        "p50_ms": round(statistics.median(ms), 1),
        "p95_ms": round(p95, 1),
        "max_ms": round(ms[-1], 1),
    }


def search_once(port: int, token: str, n: int) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    query = f"{WORDS[n % len(WORDS)]} {WORDS[(n * 7) % len(WORDS)]} visit {n}"
    params = urlencode({"q": query, "chat": CHAT, "k": 5, "user_id": f"user{n % 50}"})
    connection.request("GET", f"/api/memory/search?{params}", headers={"Authorization": f"Bearer {token}"})
    response = connection.getresponse()
    response.read()
    connection.close()
    return response.status


def measure(version: str, tree: Path, args: argparse.Namespace, tokens: Path, flooder: str, prober: str) -> dict:
    port, work = free_port(), Path(tempfile.mkdtemp(prefix=f"api_load_{version}_"))
    env = environment.child_env(PYTHONPATH=f"{tree}:{tree / 'tests'}", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(port), str(tokens), str(args.store), str(work)], cwd=tree, env=env
    )
    if args.pin:
        os.sched_setaffinity(server.pid, {0})
        os.sched_setaffinity(0, set(range(1, os.cpu_count() or 2)))
    try:
        deadline = time.monotonic() + 600
        while True:
            assert server.poll() is None and time.monotonic() < deadline, f"{version}: the server did not start"
            try:
                flood.probe_search(
                    http.client.HTTPConnection("127.0.0.1", port, timeout=5), prober, CHAT, "/api/health"
                )
                break
            except (OSError, AssertionError):
                time.sleep(0.5)
        started_rss = rss_mb(server.pid)
        flooded = flood.main(port, flooder, prober, CHAT, args.flood, args.every, "search")
        statuses = Counter(r["status"] for r in flooded["asks"])
        report = {
            "probe_search_idle": stats(flooded["idle"]),
            "probe_search_during_flood": stats(flooded["during"]),
            "health_idle": stats(flooded["health_idle"]),
            "health_during_flood": stats(flooded["health_during"]),
            "flood_statuses": dict(statuses),
            "flood_retry_after": sorted({r["retry_after"] for r in flooded["asks"] if r["status"] == 429}),
            "flood_answered": stats([r["seconds"] for r in flooded["asks"] if r["status"] == 200]),
        }
        idle_p95, during_p95 = report["probe_search_idle"]["p95_ms"], report["probe_search_during_flood"].get("p95_ms")
        report["probe_p95_ratio"] = round(during_p95 / idle_p95, 2) if during_p95 else None
        curve = [(0, started_rss)]
        done = 0
        with ThreadPoolExecutor(4) as pool:
            while done < args.searches:
                batch = list(pool.map(lambda n: search_once(port, prober, n), range(done, done + args.step)))
                assert set(batch) == {200}, Counter(batch)
                done += args.step
                curve.append((done, rss_mb(server.pid)))
        report["rss_mb_after_searches"] = curve
        report["rss_growth_mb_second_half"] = round(curve[-1][1] - curve[len(curve) // 2][1], 1)
        report["recall_run_files"] = sum(1 for _ in (work / "recall_runs").rglob("run_*.json"))
        return report
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:  # a server still draining a flood's queue
            server.kill()
            server.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default=None, help="the earlier commit (default: merge base with main)")
    parser.add_argument("--flood", type=int, default=300, help="searches of the flooding token")
    parser.add_argument("--every", type=float, default=0.01, help="seconds between two flooding searches")
    parser.add_argument("--searches", type=int, default=600, help="distinct searches for the memory curve")
    parser.add_argument("--step", type=int, default=100, help="searches between two RSS readings")
    parser.add_argument("--store", type=Path, default=Path(tempfile.mkdtemp(prefix="nm_api_load_")))
    parser.add_argument(
        "--pin",
        action="store_true",
        help="server on CPU 0, this client on the others: the clients' own CPU is not the server's",
    )
    args = parser.parse_args(argv)
    before = (
        args.before
        or subprocess.run(
            ["git", "-C", str(REPO), "merge-base", "HEAD", "main"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    tokens = Path(tempfile.mkdtemp(prefix="api_load_tokens_")) / "tokens.json"
    flooder, prober = add_token(tokens, "flood", [CHAT]), add_token(tokens, "probe", [CHAT])
    out = {"before_commit": before, "flood": args.flood, "every_s": args.every, "searches": args.searches}
    for version, tree in (("before", tree_at(before)), ("now", REPO)):
        out[version] = measure(version, tree, args, tokens, flooder, prober)
        print(json.dumps({version: out[version]}), file=sys.stderr, flush=True)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
