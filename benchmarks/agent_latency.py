"""Agent latency per profile without an LLM, on the RealTalk TRAIN chats' questions.

Builds the layers of each train chat (Chat_1..Chat_7), indexes them in a temporary LanceDB
(or ``--store DIR``, reused when it already holds the chats), loads the embedder and each chat
once, then answers every question (categories 1-3, resolvable gold) with ``query.ask`` per
profile and prints latency p50/p95 (ms; wall clock, and CPU time of the process, which is what
counts when other processes share the cores) beside exact recall and precision of the selected
evidence, recall@10 of the graded pool, the mean number of calls and the stop reasons.
Targets on a 2-core machine: fast p95 <= 100 ms, balanced p95 <= 300 ms. Test chats are refused.

    .venv/bin/python benchmarks/agent_latency.py [--data DIR] [--profiles fast,balanced]
        [--per-chat N] [--store DIR] [--cache DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl
from common import DEFAULT_DATA, build_embedder, index_chat, message_vectors, open_index, train_files

from narrative_mirror import Memory
from narrative_mirror.chats import load_chat
from narrative_mirror.gold import gold_qa_frame


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--profiles", default="fast,balanced,deep")
    parser.add_argument("--per-chat", type=int, default=0, help="questions per chat (0 = all)")
    parser.add_argument("--store", type=Path, help="LanceDB folder to build or reuse (default: a temp folder)")
    parser.add_argument("--cache", type=Path, help="folder caching message vectors between runs")
    parser.add_argument("--json", type=Path, help="write the per-profile summary here")
    args = parser.parse_args(argv)

    embedder = build_embedder()
    embedder.encode(["load the model once, before any timing"])
    store_dir = args.store or Path(tempfile.mkdtemp(prefix="agent_latency_"))
    store = open_index(store_dir)
    questions: list[tuple[str, str, int, list[str]]] = []
    indexed = set(store.chat_files())
    for path in train_files(args.data):
        chat = load_chat(path)
        if chat.chat_file not in indexed:
            started = time.perf_counter()
            messages = chat.messages.sort("position")
            index_chat(store, messages, message_vectors(messages, embedder, args.cache))
            print(
                f"indexed {chat.chat_file} ({chat.messages.height} messages) in {time.perf_counter() - started:.1f} s",
                file=sys.stderr,
            )
        gold = gold_qa_frame(chat).filter(pl.col("category").is_in([1, 2, 3]) & (pl.col("gold_ids").list.len() > 0))
        if args.per_chat:
            gold = gold.head(args.per_chat)
        questions += [(chat.chat_file, r["question"], r["category"], r["gold_ids"]) for r in gold.iter_rows(named=True)]

    memory = Memory(None, store=store, embedder=embedder)
    for chat_file in sorted({q[0] for q in questions}):
        memory.search([chat_file], "warm up", k=1)  # load the chat into memory before timing

    summary = {}
    for profile in args.profiles.split(","):
        latencies, cpu, recalls, precisions, pool_r10, calls, stops = [], [], [], [], [], [], Counter()
        for chat_file, question, _category, gold_ids in questions:
            started, cpu_started = time.perf_counter(), time.process_time()
            answer = memory.trace(chat_file, question, profile=profile)
            latencies.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - cpu_started) * 1000)
            gold, selected = set(gold_ids), set(answer.selected_ids)
            recalls.append(len(gold & selected) / len(gold))
            precisions.append(len(gold & selected) / len(selected) if selected else 0.0)
            pool_r10.append(len(gold & set(answer.ranked_ids[:10])) / len(gold))
            calls.append(answer.calls)
            stops[answer.stop_reason] += 1
        row = {
            "questions": len(questions),
            "p50_ms": round(percentile(latencies, 50), 1),
            "p95_ms": round(percentile(latencies, 95), 1),
            # CPU time of this process (all its threads): what the wall time would be on an
            # otherwise idle machine, when other processes compete for the cores.
            "cpu_p50_ms": round(percentile(cpu, 50), 1),
            "cpu_p95_ms": round(percentile(cpu, 95), 1),
            "exact_recall": round(statistics.mean(recalls), 4),
            "precision": round(statistics.mean(precisions), 4),
            "pool_recall@10": round(statistics.mean(pool_r10), 4),
            "mean_calls": round(statistics.mean(calls), 2),
            "stop_reasons": dict(stops),
        }
        summary[profile] = row
        print(
            f"{profile:9s} n={row['questions']} p50={row['p50_ms']} ms p95={row['p95_ms']} ms "
            f"(cpu p50={row['cpu_p50_ms']} p95={row['cpu_p95_ms']} ms) "
            f"exact_recall={row['exact_recall']:.3f} precision={row['precision']:.3f} "
            f"pool_R@10={row['pool_recall@10']:.3f} calls={row['mean_calls']} stops={row['stop_reasons']}"
        )
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
