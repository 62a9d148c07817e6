"""Evidence recall of every retrieval variant on the RealTalk TRAIN chats (Chat_1..Chat_7).

Builds the layers of each train chat (narrative_mirror.layers), indexes them in a temporary LanceDB through IndexStore and
runs every question of categories 1-3 through ``Retriever.search`` for each variant. Prints
exact R@5 / R@10 / R@20 and nDCG@10 per category and overall, beside the flat-hybrid baseline
of docs/retrieval-notes.md re-measured in the same run (one message per row as
``speaker: text``, MiniLM dense + bm25s BM25 with its English stopwords, RRF k=60), and query
latency p50/p95 (model load excluded). Test chats are refused.

    .venv/bin/python benchmarks/retrieval_variants.py [--data DIR] [--cache DIR]
        [--variants hybrid,dual_path] [--set hybrid.w_speaker=0.5 ...] [--json OUT]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np
import polars as pl
from common import DEFAULT_DATA, build_embedder, index_chat, message_vectors, open_index, train_files

from narrative_mirror import settings
from narrative_mirror.chats import load_chat
from narrative_mirror.embedding import Embedder
from narrative_mirror.gold import gold_qa_frame
from narrative_mirror.index_store import IndexStore
from narrative_mirror.metrics.ndcg_at_k import ndcg_at_k
from narrative_mirror.metrics.recall_at_k import recall_at_k
from narrative_mirror.retrieval import dense
from narrative_mirror.retrieval.config import VARIANTS
from narrative_mirror.retrieval.engine import Retriever
from narrative_mirror.retrieval.fusion import rrf

CATEGORIES = (1, 2, 3)
KS = (5, 10, 20)


@dataclass
class ChatData:
    chat_file: str
    messages: pl.DataFrame
    vectors: np.ndarray
    questions: pl.DataFrame  # schema.GOLD_QA, categories 1-3 with resolvable gold


def load_train(data_dir: Path, embedder: Embedder, store: IndexStore, cache: Path | None) -> list[ChatData]:
    chats = []
    for path in train_files(data_dir):
        started = time.perf_counter()
        chat = load_chat(path)
        messages = chat.messages.sort("position")
        vectors = message_vectors(messages, embedder, cache)
        embedded = time.perf_counter()
        index_chat(store, messages, vectors)
        print(
            f"  {chat.chat_file}: {messages.height} messages; embed {embedded - started:.1f} s, layers + index "
            f"{time.perf_counter() - embedded:.1f} s",
            file=sys.stderr,
        )
        qa = gold_qa_frame(chat).filter(pl.col("category").is_in(CATEGORIES) & (pl.col("gold_ids").list.len() > 0))
        chats.append(ChatData(chat.chat_file, messages, vectors, qa))
    return chats


def baseline_rankings(chat: ChatData, embedder: Embedder, depth: int = 50) -> list[list[str]]:
    """The retrieval-notes flat hybrid: bm25s (its tokenizer, English stopwords) + MiniLM, RRF 60."""
    texts = [f"{s}: {t}" for s, t in zip(chat.messages["speaker"], chat.messages["text"])]
    ids = chat.messages["local_id"].to_list()
    model = bm25s.BM25()
    model.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    questions = chat.questions["question"].to_list()
    qvecs = embedder.encode(questions)
    out = []
    for question, qvec in zip(questions, qvecs):
        tokens = bm25s.tokenize([question], stopwords="en", show_progress=False)
        lexical = []
        if tokens.vocab:
            # Map the query's vocabulary onto the corpus's; unknown words are dropped.
            words = [w for w in tokens.vocab if w in model.vocab_dict]
            if words:
                scores = model.get_scores(words)
                lexical = [r for r, _ in dense.top_k(scores) if scores[r] > 0]
        dense_rank = [r for r, _ in dense.top_k(dense.cosine_scores(chat.vectors, qvec))]
        out.append([ids[r] for r, _ in rrf([lexical, dense_rank], k=60)[:depth]])
    return out


def scores_of(rankings: Sequence[Sequence[str]], questions: pl.DataFrame) -> dict:
    """Mean R@k and nDCG@10 (percent) per category and overall."""
    rows = []
    for ranked, gold, category in zip(rankings, questions["gold_ids"].to_list(), questions["category"].to_list()):
        row = {"category": category, "ndcg@10": ndcg_at_k(ranked, gold, 10)}
        row.update({f"R@{k}": recall_at_k(ranked, gold, k) for k in KS})
        rows.append(row)
    frame = pl.DataFrame(rows)
    metrics = [f"R@{k}" for k in KS] + ["ndcg@10"]
    out = {"all": {m: 100 * frame[m].mean() for m in metrics} | {"n": frame.height}}
    for category in CATEGORIES:
        part = frame.filter(pl.col("category") == category)
        out[str(category)] = {m: 100 * part[m].mean() for m in metrics} | {"n": part.height}
    return out


def run_variant(
    retriever: Retriever, chats: Sequence[ChatData], variant: str, depth: int = 20
) -> tuple[list[list[str]], list[float]]:
    rankings, latencies = [], []
    for chat in chats:
        for question in chat.questions["question"].to_list():
            t = time.perf_counter()
            result = retriever.search(chat.chat_file, question, k=depth, variant=variant)
            latencies.append((time.perf_counter() - t) * 1000)
            rankings.append([h.local_id for h in result.hits])
    return rankings, latencies


def with_overrides(config: dict, assignments: Sequence[str]) -> dict:
    """``section.key=value`` (TOML value) assignments applied to a copy of ``config``."""
    out = copy.deepcopy(config)
    for assignment in assignments:
        dotted, _, value = assignment.partition("=")
        *parents, key = dotted.split(".")
        node = out
        for part in parents:
            node = node[part]
        if key not in node:
            raise SystemExit(f"--set {assignment}: no setting {dotted!r} in retrieval.toml")
        node[key] = tomllib.loads(f"v = {value}")["v"]
    return out


def format_table(results: dict[str, dict]) -> str:
    header = f"{'variant':<22} {'cat':>3} {'n':>4} {'R@5':>6} {'R@10':>6} {'R@20':>6} {'nDCG@10':>8} {'p50 ms':>7} {'p95 ms':>7}"
    lines = [header, "-" * len(header)]
    for name, res in results.items():
        for cat in ("1", "2", "3", "all"):
            s = res["scores"][cat]
            lat = f"{res['p50_ms']:>7.1f} {res['p95_ms']:>7.1f}" if cat == "all" and "p50_ms" in res else ""
            lines.append(
                f"{name if cat == '1' else '':<22} {cat:>3} {s['n']:>4} {s['R@5']:>6.1f} {s['R@10']:>6.1f} "
                f"{s['R@20']:>6.1f} {s['ndcg@10']:>8.1f} {lat}"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="RealTalk folder (train chats are taken)")
    parser.add_argument("--cache", type=Path, default=None, help="folder to cache message vectors between runs")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated variants")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="override section.key=value")
    parser.add_argument("--json", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variants {unknown}; known: {list(VARIANTS)}")

    embedder = build_embedder()
    embedder.encode(["warm up"])  # model load is not query latency
    config = with_overrides(settings.load_config("retrieval"), args.overrides)
    with tempfile.TemporaryDirectory(prefix="nm_bench_") as tmp:
        store = open_index(Path(tmp) / "lancedb")
        t = time.perf_counter()
        chats = load_train(args.data, embedder, store, args.cache)
        print(f"indexed {len(chats)} train chats in {time.perf_counter() - t:.1f} s")
        questions = pl.concat([c.questions for c in chats])
        results: dict[str, dict] = {}
        baseline = [r for c in chats for r in baseline_rankings(c, embedder)]
        results["baseline_flat_hybrid"] = {"scores": scores_of(baseline, questions)}
        retriever = Retriever(store, embedder, config)
        for chat in chats:
            retriever.chat(chat.chat_file)  # reading the store is index loading, not query latency
        for variant in variants:
            rankings, latencies = run_variant(retriever, chats, variant)
            results[variant] = {
                "scores": scores_of(rankings, questions),
                "p50_ms": float(np.percentile(latencies, 50)),
                "p95_ms": float(np.percentile(latencies, 95)),
            }
    print(
        f"{questions.height} questions (categories 1-3, gold resolvable); default variant: {config['default_variant']}"
    )
    print(format_table(results))
    if "hybrid_learned" in results:
        print(
            "hybrid_learned is IN-SAMPLE here (its weights were fitted on these chats); its held-out "
            "(leave-one-chat-out) R@10 is printed by benchmarks/train_fusion.py."
        )
    if args.json:
        args.json.write_text(json.dumps({"overrides": args.overrides, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
