"""Seed 003's study on the RealTalk TRAIN chats (Chat_1..Chat_7): Variant A (query expansion ->
flat -> beam descent through L2 threads / L1 blocks, rewriting every N), baselines 1, 1b, 2, 2b,
schema induction, and the Query_t ablation (narrative_mirror/retrieval/traversal_study.VARIANTS).
Prints a markdown table with nDCG@10 and recall@10 at iteration 0 and at the best iteration of
every variant, the rewriter's actions, and a leave-one-chat-out choice among (variant, iteration)
against the flat default search: the default changes only if that choice wins held out.

Offline rewriter by default. ``--llm-url URL --llm-model NAME`` uses an OpenAI-compatible
endpoint for expansion, schema and rewrites; ``--llm-server`` starts the tests' local llama.cpp
server (SmolLM2-135M, loopback) for the run. ``--questions N`` keeps the first N questions of
each chat (an LLM run on a subset). Rewrites are cached by (query, context, action) in
``--rewrite-cache FILE`` across runs.

    nice -n 5 .venv/bin/python benchmarks/seed003_traversal.py [--data DIR] [--cache DIR] [--chats 2]
        [--variants "flat,A,1"] [--questions N] [--llm-server | --llm-url URL --llm-model NAME] [--json OUT]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from common import DEFAULT_DATA, build_embedder, open_index

from narrative_mirror import settings
from narrative_mirror.retrieval.engine import Retriever
from narrative_mirror.retrieval.query_rewrite import RewriteCache, llm_expander, llm_rewriter, llm_schema
from narrative_mirror.retrieval.traversal import ChatScorer, Tools, Tree, run_variant
from narrative_mirror.retrieval.traversal_study import (
    by_name,
    format_table,
    leave_one_chat_out,
    per_iteration,
    summary_row,
)


def llm_tools(base_url: str, model: str, cache: RewriteCache, failures: Counter) -> Tools:
    from narrative_mirror.llm import LLMClient, LLMSettings

    client = LLMClient(LLMSettings(base_url=base_url, model=model, timeout_s=120, max_retries=1))
    return Tools(
        rewrite=llm_rewriter(client, failures),
        expand=llm_expander(client, failures),
        schema=llm_schema(client, failures),
        cache=cache,
        name=f"llm:{model}",
    )


@contextlib.contextmanager
def local_llm_server():
    """The tests' llama.cpp server (tests/llm_servers.py), for a run with a real LLM offline."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from llm_servers import llama_server

    with llama_server(timeout_s=120, startup_s=120) as llm:
        yield llm.base_url, llm.model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--cache", type=Path, default=None, help="folder to cache message vectors between runs")
    parser.add_argument("--chats", type=int, default=None, help="only the first N train chats (debugging)")
    parser.add_argument("--questions", type=int, default=None, help="only the first N questions of each chat")
    parser.add_argument("--variants", default=None, help="comma-separated variant names or name prefixes")
    parser.add_argument("--rewrite-cache", type=Path, default=None, help="JSON-lines rewrite cache kept across runs")
    parser.add_argument("--llm-url", default=None)
    parser.add_argument("--llm-model", default="local")
    parser.add_argument("--llm-server", action="store_true", help="start the tests' llama.cpp SmolLM2 server")
    parser.add_argument("--json", type=Path, default=None, help="write rows, LOCO folds and actions here")
    args = parser.parse_args(argv)
    variants = by_name(args.variants)

    from retrieval_variants import load_train

    embedder = build_embedder()
    cache = RewriteCache(args.rewrite_cache)
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="nm_seed003_"))
        if args.llm_server:
            args.llm_url, args.llm_model = stack.enter_context(local_llm_server())
        failures: Counter = Counter()  # LLM calls that failed and fell back to the offline step
        tools = llm_tools(args.llm_url, args.llm_model, cache, failures) if args.llm_url else Tools(cache=cache)
        store = open_index(Path(tmp) / "lancedb")
        data = args.data
        if args.chats:  # a folder holding the first N train chats only
            data = Path(tmp) / "chats"
            data.mkdir()
            for path in sorted(args.data.glob("Chat_[1-7]_*.json"))[: args.chats]:
                (data / path.name).symlink_to(path.resolve())
        chats = load_train(data, embedder, store, args.cache)
        retriever = Retriever(store, embedder, settings.load_config("retrieval"))
        rankings: dict[str, list] = {v.name: [] for v in variants}
        actions: dict[str, Counter] = {v.name: Counter() for v in variants}
        gold, chat_of, schema_examples = [], [], []
        started = time.perf_counter()
        for chat in chats:
            tree = Tree.from_chat(retriever.chat(chat.chat_file))
            scorer = ChatScorer(retriever, chat.chat_file)
            questions = chat.questions.head(args.questions) if args.questions else chat.questions
            for question, gold_ids in zip(questions["question"].to_list(), questions["gold_ids"].to_list()):
                gold.append(gold_ids)
                chat_of.append(chat.chat_file)
                for variant in variants:
                    run = run_variant(variant, question, tree, scorer, tools)
                    rankings[variant.name].append(run.rankings)
                    actions[variant.name].update(a for a in run.actions if a)
                    if run.schema and len(schema_examples) < 3:
                        schema_examples.append(
                            {"question": question, "categories": run.schema, "candidates": run.schema_candidates}
                        )
            print(
                f"  {chat.chat_file}: {questions.height} questions, {time.perf_counter() - started:.0f} s",
                file=sys.stderr,
            )
    rows = [summary_row(name, runs, gold) for name, runs in rankings.items()]
    print(
        f"{len(gold)} questions from {len(chats)} train chats; rewriter: {tools.name}; "
        f"rewrite cache {cache.hits} hits / {cache.misses} misses; {time.perf_counter() - started:.0f} s"
    )
    print(format_table(rows))
    iterations = {name: per_iteration(runs, gold) for name, runs in rankings.items()}
    print(
        "\nnDCG@10 per iteration: "
        + "; ".join(n + ": " + " ".join(f"{it['ndcg@10']:.1f}" for it in its) for n, its in iterations.items())
    )
    if failures:
        print(f"LLM calls that fell back to the offline step: {dict(failures)}")
    print("\nactions: " + "; ".join(f"{n}: {dict(c)}" for n, c in actions.items() if c))
    for example in schema_examples[:1]:
        print(f"schema example: {json.dumps(example)[:600]}")
    loco = None
    if len(set(chat_of)) > 1 and "flat" in rankings:
        loco = leave_one_chat_out(rankings, gold, chat_of)
        print(f"\nleave-one-chat-out nDCG@10 held out: chosen {loco['chosen']:.1f} vs flat {loco['baseline']:.1f}")
        for fold in loco["folds"]:
            print(
                f"  {fold['held_out']}: {fold['chosen']} {fold['chosen_ndcg@10']:.1f} vs {fold['baseline_ndcg@10']:.1f}"
            )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "rewriter": tools.name,
                    "rows": rows,
                    "per_iteration": iterations,
                    "loco": loco,
                    "actions": {n: dict(c) for n, c in actions.items()},
                    "llm_failures": dict(failures),
                    "schema_examples": schema_examples,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
