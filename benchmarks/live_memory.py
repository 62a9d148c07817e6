"""Live adds on a large chat: how long until a 20-message batch is durable and searchable, what
it costs beside encoding those 20 messages, and whether concurrent writers and kill -9 lose or
duplicate anything.

1. A live chat of ``--messages`` messages (default 45,000) is seeded: its log through
   ``LiveLog`` and its index rows with random unit vectors (the add path, not retrieval quality,
   is measured here; seeding with the embedder would take minutes).
2. ``--batches`` adds of 20 new messages each (``LiveMemory.add`` as ``serve`` wires it, the real
   embedder): per add, the time until it returns, until the retriever's default search of the
   same process finds its last message (then, untimed, a full-text (LanceDB), a dense and a BM25
   search each find it too), and until a second reader (its own store, retriever and live memory,
   as another ``serve`` has) finds it; against ``Embedder.encode`` of the same 20 texts.
3. ``--writers`` threads x ``--writer-batches`` batches of 3 messages each to one chat, each batch
   re-sent once: lost and duplicated messages counted from the log and the index.
4. kill -9 of a writing process ``--kills`` times (tests/narrative_mirror/live's writer): every
   acknowledged message must be in the log, none twice.

5. The layers catching up through Dagster (``--layers-messages`` / ``--layers-batches``): a
   live chat of that many messages is built by ``narrative-mirror build`` (a fresh process, its
   own NM_HOME), then ``--layers-batches`` batches of 20 are added and ``build`` runs again: its
   seconds, the assets it ran and the messages it encoded; then once more (nothing to do).

Prints one JSON object (and each section's as it ends, on stderr). ``--sections`` picks some.

    .venv/bin/python benchmarks/live_memory.py [--messages 45000] [--batches 30] [--writers 8]
        [--writer-batches 200] [--kills 10]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from narrative_mirror.embedding import Embedder  # noqa: E402
from narrative_mirror.home import Home
from narrative_mirror.index_store import IndexStore  # noqa: E402
from narrative_mirror.live.index import messages_frame  # noqa: E402
from narrative_mirror.live.log import LiveLog  # noqa: E402
from narrative_mirror.live.memory import LiveMemory, serving_memory  # noqa: E402
from narrative_mirror.retrieval.engine import Retriever  # noqa: E402
from resources import environment  # noqa: E402

WORDS = "harbor garden marathon bakery ferry knee ankle beans rye bridge physio race lunch heron mill".split()


def pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)) * 1000, 1)


def seed(home: Path, chat: str, n: int, dim: int) -> None:
    import polars as pl
    import pyarrow as pa

    from narrative_mirror import schema
    from narrative_mirror.index_rows import message_rows

    log = LiveLog(Home(home).live)
    start = datetime(2020, 1, 1)
    rng = np.random.default_rng(0)
    for first in range(0, n, 1000):
        log.append(
            chat,
            [
                {
                    "author": "AB"[i % 2],
                    "text": f"{' '.join(rng.choice(WORDS, 8))} number {i}",
                    "timestamp": (start + timedelta(minutes=i)).isoformat(),
                }
                for i in range(first, min(n, first + 1000))
            ],
        )
    frame = messages_frame(chat, log.messages(chat))
    vectors = rng.normal(size=(frame.height, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    embeddings = pl.DataFrame(
        {
            "message_id": frame["message_id"],
            "chat_file": frame["chat_file"],
            "local_id": frame["local_id"],
            "vector": [v.tolist() for v in vectors],
        },
        schema=schema.MESSAGE_EMBEDDINGS,
    )
    rows: pa.Table = message_rows(frame, embeddings)
    IndexStore(str(Home(home).lancedb)).add_rows("messages", chat, rows)


def adds(home: Path, chat: str, batches: int, embedder: Embedder) -> dict:
    store = IndexStore(str(Home(home).lancedb))
    retriever = Retriever(store, embedder)
    live = serving_memory(Home(home).live, retriever)
    reader = Retriever(IndexStore(str(Home(home).lancedb)), embedder)  # a second serve's
    reader_live = serving_memory(Home(home).live, reader)
    started = time.perf_counter()
    retriever.search(chat, "warm up", k=5)
    first_read = time.perf_counter() - started
    reader.search(chat, "warm up", k=5)
    returned, searchable, after_return, second, encode_only, search_again = [], [], [], [], [], []
    for b in range(batches):
        token = f"zq{b}unique{b * 7919}"
        batch = [
            {
                "author": "AB"[i % 2],
                "text": f"{' '.join(np.random.choice(WORDS, 6))} {token if i == 19 else i}",
                "timestamp": f"2025-06-01T{b % 24:02d}:{i:02d}:00Z",
            }
            for i in range(20)
        ]
        started = time.perf_counter()
        result = live.add(chat, batch)
        returned.append(time.perf_counter() - started)
        found = result.ids[-1] in [h.local_id for h in retriever.search(chat, batch[-1]["text"], k=5).hits]
        searchable.append(time.perf_counter() - started)
        after_return.append(searchable[-1] - returned[-1])
        # each path alone finds it too (not timed: a person's search is the one above)
        last = f"{chat}/{result.ids[-1]}"
        found_text = [m for m, _ in store.full_text_search("messages", chat, token, 3)] == [last]
        found_dense = last.split("/", 1)[1] in [
            h.local_id for h in retriever.search(chat, batch[-1]["text"], k=5, variant="dense").hits
        ]
        found_bm25 = [h.local_id for h in retriever.search(chat, token, k=1, variant="bm25").hits] == [result.ids[-1]]
        if not (found and found_text and found_dense and found_bm25):
            raise AssertionError(
                f"batch {b}: not found (search {found}, full-text {found_text}, dense {found_dense}, bm25 {found_bm25})"
            )
        again = time.perf_counter()
        retriever.search(chat, batch[-1]["text"], k=5)  # the same search with nothing new: its cost alone
        search_again.append(time.perf_counter() - again)
        seen = time.perf_counter()
        reader_live.refresh(chat)  # what the second serve does before a request reads the chat
        if [h.local_id for h in reader.search(chat, token, k=1, variant="bm25").hits] != [result.ids[-1]]:
            raise AssertionError(f"batch {b}: the second reader does not find it")
        second.append(time.perf_counter() - seen)
        started = time.perf_counter()
        embedder.encode([f"{m['author']}: {m['text']}" for m in batch])
        encode_only.append(time.perf_counter() - started)
    return {
        "first_read_of_chat_ms": round(first_read * 1000, 1),
        "add_p50_ms": pct(returned, 50),
        "add_p95_ms": pct(returned, 95),
        "searchable_p50_ms": pct(searchable, 50),
        "searchable_p95_ms": pct(searchable, 95),
        "search_after_return_p50_ms": pct(after_return, 50),
        "search_after_return_p95_ms": pct(after_return, 95),
        "same_search_again_p50_ms": pct(search_again, 50),
        "same_search_again_p95_ms": pct(search_again, 95),
        "second_reader_p50_ms": pct(second, 50),
        "second_reader_p95_ms": pct(second, 95),
        "encode20_p50_ms": pct(encode_only, 50),
        "encode20_p95_ms": pct(encode_only, 95),
        "add_minus_encode_p50_ms": round(pct(returned, 50) - pct(encode_only, 50), 1),
        "add_over_encode_p95": round(pct(returned, 95) / pct(encode_only, 95), 2),
        "cache": {k: v for k, v in retriever.cache_info().items() if k in ("loads", "appends", "hits")},
        "second_reader_cache": {k: v for k, v in reader.cache_info().items() if k in ("loads", "appends", "hits")},
    }


def writers(home: Path, n_writers: int, n_batches: int, embedder: Embedder) -> dict:
    store = IndexStore(str(Home(home).lancedb))
    lives = [LiveMemory(Home(home).live, store, embedder) for _ in range(2)]  # two "processes"
    started = time.perf_counter()

    def write(w: int) -> None:
        for b in range(n_batches):
            batch = [
                {
                    "id": f"w{w}-b{b}-{i}",
                    "author": "A",
                    "text": f"writer {w} batch {b} message {i}",
                    "timestamp": "2025-01-01T00:00:00Z",
                }
                for i in range(3)
            ]
            lives[w % 2].add("busy", batch)
            lives[(w + 1) % 2].add("busy", batch)  # re-sent through the other writer
            if b % 50 == 49:
                print(
                    f"writer {w}: {b + 1} batches, {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True
                )

    threads = [threading.Thread(target=write, args=(w,)) for w in range(n_writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = [m.local_id for m in LiveLog(Home(home).live).messages("busy")]
    expected = n_writers * n_batches * 3
    rows = store.chat_row_count("messages", "busy")
    return {
        "writers": n_writers,
        "batches_each": n_batches,
        "expected": expected,
        "in_log": len(ids),
        "duplicated_in_log": len(ids) - len(set(ids)),
        "lost": expected - len(set(ids)),
        "index_rows": rows,
        "seconds": round(time.perf_counter() - started, 1),
    }


WRITER = """
import sys
sys.path.insert(0, sys.argv[3])
from narrative_mirror.live.log import LiveLog
log = LiveLog(sys.argv[1])
for b in range(10**6):
    log.append("crash", [{"id": f"{sys.argv[2]}-{b}-{i}", "author": "A", "text": f"{sys.argv[2]} {b} {i}",
                          "timestamp": "2025-01-01T00:00:00Z"} for i in range(5)])
    print(f"{sys.argv[2]}-{b}", flush=True)
"""


def kills(home: Path, rounds: int) -> dict:
    acknowledged: list[str] = []
    lost = duplicated = 0
    for r in range(rounds):
        child = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(Home(home).live), f"r{r}", str(ROOT)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        want = 5 + int(np.random.randint(0, 50))
        got = [child.stdout.readline().strip() for _ in range(want)]
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
        acknowledged += got
        ids = [m.local_id for m in LiveLog(Home(home).live).messages("crash")]
        duplicated = max(duplicated, len(ids) - len(set(ids)))
        lost = len({f"{b}-{i}" for b in acknowledged for i in range(5)} - set(ids))
    return {"rounds": rounds, "acknowledged_batches": len(acknowledged), "lost": lost, "duplicated": duplicated}


def build(home: Path, data: Path) -> tuple[float, dict]:
    """``narrative-mirror build --json`` in a fresh process on ``home``: (seconds, its chat's report)."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", "from cli.main import run; run()", "build", "--data", str(data), "--json"],
        cwd=ROOT,
        env=environment.child_env(NM_HOME=str(home), PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(done.stdout)["per_file"]["walk"]
    return time.perf_counter() - started, {k: report.get(k) for k in ("messages", "encoded_messages", "ran")}


def layers(root: Path, n_messages: int, n_batches: int, embedder: Embedder) -> dict:
    home, data = root / "layers_home", root / "layers_data"
    data.mkdir(parents=True)
    start = datetime(2024, 1, 1)
    rng = np.random.default_rng(1)
    LiveLog(Home(home).live).append(
        "walk",
        [
            {
                "author": "AB"[i % 2],
                "text": f"{' '.join(rng.choice(WORDS, 8))} {i}",
                "timestamp": (start + timedelta(minutes=i)).isoformat(),
            }
            for i in range(n_messages)
        ],
    )
    first_seconds, first = build(home, data)
    live = LiveMemory(Home(home).live, IndexStore(str(Home(home).lancedb)), embedder)
    for b in range(n_batches):
        live.add(
            "walk",
            [
                {
                    "author": "AB"[i % 2],
                    "text": f"{' '.join(rng.choice(WORDS, 6))} batch {b} {i}",
                    "timestamp": (start + timedelta(days=30, minutes=20 * b + i)).isoformat(),
                }
                for i in range(20)
            ],
        )
    catch_up_seconds, catch_up = build(home, data)
    again_seconds, again = build(home, data)
    return {
        "messages": n_messages,
        "batches": n_batches,
        "first_build_seconds": round(first_seconds, 1),
        "first": first,
        "catch_up_seconds": round(catch_up_seconds, 1),
        "catch_up": catch_up,
        "nothing_to_do_seconds": round(again_seconds, 1),
        "nothing_to_do": again,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=45_000)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--writer-batches", type=int, default=200)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--layers-messages", type=int, default=1000)
    parser.add_argument("--layers-batches", type=int, default=5)
    parser.add_argument("--sections", default="add_20,kill_9,concurrent,layers")
    args = parser.parse_args()
    wanted = set(args.sections.split(","))
    home = Path(tempfile.mkdtemp(prefix="nm_live_bench_"))
    embedder = Embedder()
    out: dict = {"messages": args.messages}

    def section(name: str, run) -> None:
        started = time.perf_counter()
        out[name] = run()
        seconds = round(time.perf_counter() - started, 1)
        if isinstance(out[name], dict):
            out[name]["section_seconds"] = seconds
        elif out[name] is None:
            out[name] = seconds
        print(json.dumps({name: out[name]}), file=sys.stderr, flush=True)  # a cut-off run keeps what it measured

    if "add_20" in wanted:
        section("seed_seconds", lambda: seed(home, "big", args.messages, embedder.dimension) or None)
        section("add_20", lambda: adds(home, "big", args.batches, embedder))
    if "kill_9" in wanted:
        section("kill_9", lambda: kills(home, args.kills))
    if "concurrent" in wanted:
        section("concurrent", lambda: writers(home, args.writers, args.writer_batches, embedder))
    if "layers" in wanted:
        section("layers", lambda: layers(home, args.layers_messages, args.layers_batches, embedder))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
