"""Query cost against chat size, through the real HTTP API: Chat_1 (476 messages) beside one big
chat made of every RealTalk session ``--copies`` times over (5 -> 44,720 messages).

1. Builds, in a temporary ``NM_HOME`` (or ``--home``), a LanceDB index holding Chat_1_Emi_Elise and
   the big chat, directly with the library (no Dagster): message frames from
   ``chats.load_chat`` (the big chat renumbers the sessions of its copies and moves copy c
   ``c * 730`` days later), vectors from ``embedding.Embedder`` (each distinct text encoded once:
   the copies share their vectors), L1 / L1.5 / L2 from ``narrative_mirror.layers`` and rows
   through ``index_rows.build_rows`` / ``replace_partition`` (``benchmarks/common.index_chat``).
2. Serves both from a separate server process (``create_app`` under uvicorn on loopback, offline,
   as ``narrative-mirror serve`` builds it), so its memory is the serving memory only.
3. Measures per chat: the cold load (the server's ``Retriever.chat`` on first use, and the first
   ask's latency), ``POST /api/ask`` (``--profile``, default ``balanced``) p50 / p95 over the same
   ``--questions`` questions (the first of Chat_1's RealTalk QA; the big chat holds Chat_1 five
   times, so they are its questions too), each asked ``--rounds`` times, and
   ``GET /api/memory/search`` p50 / p95, the two chats interleaved question by question (the
   machine's other load hits both alike); the big/small ratios; the server's RSS after start,
   after each load, and its peak (``VmHWM``); the load average before and after.

Prints one JSON object. Targets (the scale issue): ask p95 on the big chat <= 2x Chat_1's,
peak RSS serving both < 1.5 GB.

    .venv/bin/python benchmarks/scale_queries.py [--copies 5] [--questions 30] [--profile balanced]
        [--home DIR (kept; an index already there is reused)] [--cache DIR (message vectors)]
        [--cache-mb N (the server's retrieval cache bound, when the retriever has one)]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for folder in (REPO, HERE):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
from common import build_embedder, free_port, latency_stats, open_index  # noqa: E402

from narrative_mirror.home import Home  # noqa: E402
from resources import environment  # noqa: E402

SMALL = "Chat_1_Emi_Elise"
BIG = "RealTalk_all_x{copies}"
DAYS_PER_COPY = 730


# -- the index ---------------------------------------------------------------------------------------
def big_chat_messages(data_dir: Path, copies: int) -> pl.DataFrame:
    """Every session of every chat file of ``data_dir``, ``copies`` times, as one chat (schema.MESSAGES):
    sessions renumbered 1.. in that order, local ids ``D<session>:<n>``, copy c moved c * 730 days."""
    from narrative_mirror import schema
    from narrative_mirror.chats import load_chat

    chat_file = BIG.format(copies=copies)
    sources = [load_chat(p).messages.sort("position") for p in sorted(Path(data_dir).glob("*.json"))]
    parts, next_session = [], 1
    for copy in range(copies):
        for messages in sources:
            numbers = {s: next_session + i for i, s in enumerate(messages["session"].unique(maintain_order=True))}
            next_session += len(numbers)
            part = messages.with_columns(
                pl.col("session").replace_strict(numbers, return_dtype=pl.Int64),
                pl.col("timestamp") + timedelta(days=DAYS_PER_COPY * copy),
            ).with_columns(
                (
                    pl.lit("D")
                    + pl.col("session").cast(pl.String)
                    + pl.lit(":")
                    + (pl.int_range(pl.len()).over("session") + 1).cast(pl.String)
                ).alias("local_id")
            )
            parts.append(part)
    big = pl.concat(parts).with_columns(
        pl.lit(chat_file).alias("chat_file"),
        (pl.lit(chat_file + "/") + pl.col("local_id")).alias("message_id"),
        pl.int_range(pl.len()).cast(pl.Int64).alias("position"),
    )
    return big.select(list(schema.MESSAGES)).cast(schema.MESSAGES)


def encode_once(embedder, texts: list[str], cache: Path | None) -> dict[str, np.ndarray]:
    """{text: vector} for the distinct ``texts`` (kept in ``cache`` when given)."""
    distinct = list(dict.fromkeys(texts))
    path = None
    if cache is not None:
        key = hashlib.sha256("\0".join([embedder.fingerprint, *distinct]).encode()).hexdigest()[:20]
        path = Path(cache) / f"scale_vectors_{key}.npy"
        if path.is_file():
            return dict(zip(distinct, np.load(path)))
    vectors = embedder.encode(distinct)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, vectors)
    return dict(zip(distinct, vectors))


def build_index(uri: str, data_dir: Path, copies: int, cache: Path | None) -> dict:
    from common import index_chat

    from narrative_mirror.chats import load_chat
    from narrative_mirror.embedding import message_texts

    started = time.perf_counter()
    store = open_index(Path(uri))
    small = load_chat(Path(data_dir) / f"{SMALL}.json").messages.sort("position")
    big = big_chat_messages(data_dir, copies)
    embedder = build_embedder()
    small_texts, big_texts = message_texts(small), message_texts(big)
    vectors = encode_once(embedder, big_texts + small_texts, cache)
    encoded = time.perf_counter()
    out = {"distinct_texts": len(vectors), "encode_s": round(encoded - started, 1)}
    for messages, texts in ((small, small_texts), (big, big_texts)):
        t = time.perf_counter()
        index_chat(store, messages, np.stack([vectors[text] for text in texts]))
        out[f"index_{messages['chat_file'][0]}_s"] = round(time.perf_counter() - t, 1)
    return out


# -- the server process ------------------------------------------------------------------------------
def _status_kb(field: str, pid: int | str = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return -1


def serve(home: Path, port: int, cache_mb: float | None) -> None:
    """The server side: ``narrative-mirror serve``'s app over ``home`` (offline), plus ``/bench/stats``."""
    import uvicorn

    from api.app import create_app
    from narrative_mirror import settings
    from narrative_mirror.events.writer import EventLog
    from narrative_mirror.retrieval.engine import Retriever

    embedder = build_embedder()
    embedder.encode(["warm up"])  # the model load is start-up, not a chat's cold load
    retrieval = settings.load_config("retrieval")
    if cache_mb is not None:
        retrieval.setdefault("cache", {})["max_mb"] = cache_mb
    retriever = Retriever(open_index(Home(home).lancedb), embedder, retrieval)
    loads: dict[str, float] = {}
    sizes: dict[str, int] = {}
    chat = retriever.chat

    def timed_chat(chat_file: str):  # the first call per chat is its cold load (requests come one by one)
        t = time.perf_counter()
        index = chat(chat_file)
        loads.setdefault(chat_file, time.perf_counter() - t)
        sizes.setdefault(chat_file, index.size)
        return index

    retriever.chat = timed_chat
    import gc

    pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
    started: list[float] = [0.0]

    def gc_pause(phase: str, info: dict) -> None:  # the cyclic GC's stop-the-world pauses
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            pauses[info["generation"]].append(time.perf_counter() - started[0])

    gc.callbacks.append(gc_pause)
    event_log = EventLog(str(Home(home).lancedb), embedder=embedder)
    app = create_app(retriever, event_log, None, runs_root=Home(home).recall_runs)

    @app.get("/bench/stats")
    async def stats():
        info = retriever.cache_info() if hasattr(retriever, "cache_info") else None
        return {
            "rss_kb": _status_kb("VmRSS"),
            "peak_rss_kb": _status_kb("VmHWM"),
            "cold_load_s": {k: round(v, 3) for k, v in loads.items()},
            "cache": info,
            "messages": sizes,
            "gc_pauses": {
                str(g): {
                    "n": len(p),
                    "total_ms": round(sum(p) * 1000, 1),
                    "max_ms": round(max(p, default=0.0) * 1000, 1),
                }
                for g, p in pauses.items()
            },
        }

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


# -- the client --------------------------------------------------------------------------------------
def cpu_seconds(pid: int) -> float:
    """CPU time of all threads of process ``pid`` (ns resolution, from /proc/<pid>/task/*/schedstat)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e9


def questions_of(data_dir: Path, n: int) -> list[str]:
    from narrative_mirror.chats import load_chat
    from narrative_mirror.gold import gold_qa_frame

    return gold_qa_frame(load_chat(Path(data_dir) / f"{SMALL}.json"))["question"].to_list()[:n]


def measure(base: str, chats: list[str], questions: list[str], profile: str, rounds: int, server_pid: int) -> dict:
    import httpx

    out: dict = {"chats": {}}
    with httpx.Client(base_url=base, timeout=300) as client:

        def ask(chat: str, question: str) -> float:
            t = time.perf_counter()
            response = client.post("/api/ask", json={"chat": chat, "question": question, "profile": profile})
            elapsed = time.perf_counter() - t
            response.raise_for_status()
            return elapsed

        def search(chat: str, question: str) -> float:
            t = time.perf_counter()
            client.get("/api/memory/search", params={"q": question, "chat": chat, "k": 5}).raise_for_status()
            return time.perf_counter() - t

        def stats() -> dict:
            return client.get("/bench/stats").json()

        out["rss_mb_after_start"] = round(stats()["rss_kb"] / 1024, 1)
        for chat in chats:  # cold: the first ask loads the chat
            first = ask(chat, questions[0])
            after = stats()
            out["chats"][chat] = {
                "messages": after["messages"].get(chat),
                "cold_load_s": after["cold_load_s"].get(chat),
                "first_ask_ms": round(first * 1000, 1),
                "rss_mb_after_load": round(after["rss_kb"] / 1024, 1),
            }
        for question in questions[1:6]:  # warm up
            for chat in chats:
                ask(chat, question)
        # Interleaved, question by question, so that both chats see the same background load.
        asks: dict[str, list[float]] = {chat: [] for chat in chats}
        searches: dict[str, list[float]] = {chat: [] for chat in chats}
        cpu: dict[str, float] = {chat: 0.0 for chat in chats}
        for _ in range(rounds):
            for question in questions:
                for chat in chats:
                    before = cpu_seconds(server_pid)
                    asks[chat].append(ask(chat, question))
                    cpu[chat] += cpu_seconds(server_pid) - before
            for question in questions:
                for chat in chats:
                    searches[chat].append(search(chat, question))
        for chat in chats:
            out["chats"][chat]["ask"] = latency_stats(asks[chat])
            # Server CPU: less sensitive to the machine's other load than wall time.
            out["chats"][chat]["ask"]["server_cpu_ms_mean"] = round(cpu[chat] / len(asks[chat]) * 1000, 1)
            out["chats"][chat]["search"] = latency_stats(searches[chat])
        final = stats()
        out["peak_rss_mb"] = round(final["peak_rss_kb"] / 1024, 1)
        out["rss_mb_end"] = round(final["rss_kb"] / 1024, 1)
        out["cache"] = final["cache"]
        out["server_gc_pauses"] = final["gc_pauses"]
    return out


def main(argv: list[str] | None = None) -> int:
    from common import DEFAULT_DATA

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the RealTalk folder")
    parser.add_argument("--copies", type=int, default=5)
    parser.add_argument("--questions", type=int, default=30)
    parser.add_argument("--profile", default="balanced")
    parser.add_argument("--rounds", type=int, default=2, help="times each question is asked of each chat")
    parser.add_argument("--home", type=Path, default=None, help="NM_HOME to build in and keep (default: a temp dir)")
    parser.add_argument("--cache", type=Path, default=None, help="folder to cache the message vectors between runs")
    parser.add_argument("--cache-mb", type=float, default=None, help="retrieval.toml [cache] max_mb for the server")
    parser.add_argument("--serve", type=Path, default=None, help=argparse.SUPPRESS)  # the server process
    parser.add_argument("--port", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve is not None:
        environment.set_for_process(environment.HOME_ENV, args.serve)
        serve(args.serve, args.port, args.cache_mb)
        return 0

    home = args.home or Path(tempfile.mkdtemp(prefix="nm_scale_"))
    home.mkdir(parents=True, exist_ok=True)
    environment.set_for_process(environment.HOME_ENV, home)
    big = BIG.format(copies=args.copies)
    uri = str(Home(home).lancedb)
    result: dict = {"home": str(home) if args.home else None, "profile": args.profile}
    try:
        present = set(open_index(Path(uri)).chat_files()) if Home(home).lancedb.exists() else set()
        if {SMALL, big} <= present:
            result["build"] = "reused"
        else:
            result["build"] = build_index(uri, args.data, args.copies, args.cache)
        questions = questions_of(args.data, args.questions)
        port = free_port()
        command = [sys.executable, str(Path(__file__).resolve()), "--serve", str(home), "--port", str(port)]
        if args.cache_mb is not None:
            command += ["--cache-mb", str(args.cache_mb)]
        server = subprocess.Popen(command, env=environment.child_env(NM_HOME=str(home)))
        try:
            import httpx

            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 300
            while True:
                if server.poll() is not None:
                    raise SystemExit(f"the server process ended with {server.returncode}")
                try:
                    if httpx.get(base + "/api/health", timeout=5).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit("the server did not start within 300 s")
                time.sleep(0.2)
            load_before = os.getloadavg()
            measured = measure(base, [SMALL, big], questions, args.profile, args.rounds, server.pid)
            measured["load_average_before_after"] = [round(load_before[0], 2), round(os.getloadavg()[0], 2)]
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
        result.update(measured)
        small_ask, big_ask = measured["chats"][SMALL]["ask"], measured["chats"][big]["ask"]
        result["ratio_big_small"] = {
            "ask_server_cpu": round(big_ask["server_cpu_ms_mean"] / small_ask["server_cpu_ms_mean"], 2),
            "ask_p50": round(big_ask["p50_ms"] / small_ask["p50_ms"], 2),
            "ask_p95": round(big_ask["p95_ms"] / small_ask["p95_ms"], 2),
            "search_p95": round(
                measured["chats"][big]["search"]["p95_ms"] / measured["chats"][SMALL]["search"]["p95_ms"], 2
            ),
        }
        result["targets"] = {
            "ask_p95_ratio_max": 2.0,
            "peak_rss_mb_max": 1536,
            "met": result["ratio_big_small"]["ask_p95"] <= 2.0 and result["peak_rss_mb"] < 1536,
        }
    finally:
        if args.home is None:
            shutil.rmtree(home, ignore_errors=True)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
