"""Seed 003's ablation on the RealTalk TRAIN chats: the rewrite context (none / leaf / branch / all)
crossed with the dual path (off: the default variant; on: ``dual_path``), the dual path's
K_global, and seed 003's iterative loop (``iterative`` variant: flat search, rewrite from the leaf
context every ``rewrite_every`` rounds, search restricted to the branches hit, repeat), printing
recall@10 and nDCG@10 per category.

The rewrite is the offline one (pseudo-relevance feedback, ``rewrite.feedback_terms``): the
question plus the terms most frequent in its context. The context is seed 003's: ``leaf`` = the
messages of a first flat search, ``branch`` = the stored summaries (label, summary, keywords) of the
L1 blocks those messages sit in and of their L2 threads, ``all`` = both. The seed found leaf
context best and branch context worst (with an LLM rewriter); this measures it for ours.

    .venv/bin/python benchmarks/rewrite_ablation.py [--data DIR] [--cache DIR] [--k-global 10,20,50]
        [--rewrite-every 1,2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from narrative_mirror.agent.rewrite import feedback_terms  # noqa: E402
from narrative_mirror.agent.search_nodes import LEAF_CONTEXT  # noqa: E402
from narrative_mirror.agent.text import tokens  # noqa: E402
from narrative_mirror.retrieval.iterative import branch_context  # noqa: E402

CONTEXTS = ("none", "leaf", "branch", "all")
BRANCHES = 2  # blocks of the best leaf hits
FEEDBACK_TERMS = 4


def rewrite_context(retriever, chat_file: str, question: str, source: str, leaf=None) -> list[tuple[str, str]]:
    """(local id, text) of the context ``source`` for ``question``: see the module doc. ``leaf``:
    the hits of the first flat search, when the caller has them."""
    if source == "none":
        return []
    if leaf is None:
        leaf = retriever.search(chat_file, question, k=LEAF_CONTEXT).hits
    out = [(h.local_id, h.text) for h in leaf] if source in ("leaf", "all") else []
    if source in ("branch", "all"):
        blocks = list(dict.fromkeys(h.block_id for h in leaf if h.block_id))[:BRANCHES]
        out += [(f"summary {i}", text) for i, text in enumerate(branch_context(retriever, chat_file, blocks))]
    return out


def rewritten(question: str, context: Sequence[tuple[str, str]]) -> str:
    """The question and the FEEDBACK_TERMS terms its context repeats most."""
    return " ".join([question, *feedback_terms([text for _, text in context], tokens(question), FEEDBACK_TERMS)])


def ablation(
    retriever,
    questions: Sequence[tuple[str, str]],
    variants: Sequence[str],
    contexts: Sequence[str] = CONTEXTS,
    depth: int = 20,
) -> dict[tuple[str, str], list[list[str]]]:
    """(context, variant) -> the ranked ids of every (chat_file, question), in order."""
    leaves = [
        retriever.search(chat, q, k=LEAF_CONTEXT).hits if set(contexts) - {"none"} else None for chat, q in questions
    ]
    queries = {
        c: [rewritten(q, rewrite_context(retriever, chat, q, c, leaf)) for (chat, q), leaf in zip(questions, leaves)]
        for c in contexts
    }
    return {
        (c, v): [
            [h.local_id for h in retriever.search(chat, query, k=depth, variant=v).hits]
            for (chat, _), query in zip(questions, queries[c])
        ]
        for c in contexts
        for v in variants
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--cache", type=Path, default=None, help="folder to cache message vectors between runs")
    parser.add_argument("--k-global", default="10,20,50", help="dual path K_global values (seed 003: about 10)")
    parser.add_argument("--rewrite-every", default="1,2", help="iterative loop: rewrite every N rounds (3 rounds)")
    args = parser.parse_args(argv)

    import polars as pl
    from common import DEFAULT_DATA, build_embedder, open_index
    from retrieval_variants import format_table, load_train, scores_of, with_overrides

    from narrative_mirror import settings
    from narrative_mirror.retrieval.engine import Retriever

    embedder = build_embedder()
    config = settings.load_config("retrieval")
    default = config["default_variant"]
    with tempfile.TemporaryDirectory(prefix="nm_ablation_") as tmp:
        store = open_index(Path(tmp) / "lancedb")
        chats = load_train(args.data or DEFAULT_DATA, embedder, store, args.cache)
        gold = pl.concat([c.questions for c in chats])
        questions = [(c.chat_file, q) for c in chats for q in c.questions["question"].to_list()]
        results = {}
        retriever = Retriever(store, embedder, config)
        for (context, variant), rankings in ablation(retriever, questions, [default, "dual_path"]).items():
            name = f"{context} / {'dual' if variant == 'dual_path' else default}"
            results[name] = {"scores": scores_of(rankings, gold)}
        for k_global in (int(k) for k in args.k_global.split(",") if k):
            sized = Retriever(store, embedder, with_overrides(config, [f"tree.k_global={k_global}"]))
            rankings = ablation(sized, questions, ["dual_path"], contexts=["none"])[("none", "dual_path")]
            results[f"none / dual K_global={k_global}"] = {"scores": scores_of(rankings, gold)}
        for every in (int(n) for n in args.rewrite_every.split(",") if n):
            looped = Retriever(store, embedder, with_overrides(config, [f"iterative.rewrite_every={every}"]))
            rankings = ablation(looped, questions, ["iterative"], contexts=["none"])[("none", "iterative")]
            results[f"loop / rewrite_every={every} (3 rounds)"] = {"scores": scores_of(rankings, gold)}
    print(
        f"{gold.height} questions; rewrite context / retrieval (dual = dual_path, K_global {config['tree']['k_global']}"
        " unless said); the default variant's weights are in-sample on these chats"
    )
    print(format_table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
