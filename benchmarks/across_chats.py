"""How much evidence recall a question loses when it is asked of ALL the RealTalk train chats
(Chat_1..Chat_7) at once instead of its own chat alone, for each merge score of
narrative_mirror/across_chats.py (a hit counts only from the question's own chat, by gold id).

    .venv/bin/python benchmarks/across_chats.py [--data DIR] [--cache DIR] [--json FILE]

Each chat is searched once per question with the default variant (k=10, as ``search_chats``
does); R@10 alone is the own chat's ranking, R@10 across is the merged ranking of all 7.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from common import DEFAULT_DATA, build_embedder, open_index
from retrieval_variants import load_train

from narrative_mirror import settings
from narrative_mirror.across_chats import MERGE_BY, merge
from narrative_mirror.metrics.recall_at_k import recall_at_k
from narrative_mirror.retrieval.engine import Retriever

K = 10


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="RealTalk folder (train chats are taken)")
    parser.add_argument("--cache", type=Path, default=None, help="folder to cache message vectors between runs")
    parser.add_argument("--json", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    embedder = build_embedder()
    with tempfile.TemporaryDirectory(prefix="nm_across_") as tmp:
        store = open_index(Path(tmp) / "lancedb")
        chats = load_train(args.data, embedder, store, args.cache)
        retriever = Retriever(store, embedder, settings.load_config("retrieval"))
        names = [c.chat_file for c in chats]
        questions = [
            (c.chat_file, q, gold)
            for c in chats
            for q, gold in zip(c.questions["question"].to_list(), c.questions["gold_ids"].to_list())
        ]
        texts = [q for _, q, _ in questions]
        qvecs = embedder.encode(texts)
        started = time.perf_counter()
        # every chat searched for every question (what an --all search does), in one batch per chat
        results = {name: retriever.search_many(name, texts, K) for name in names}
        search_s = time.perf_counter() - started
        alone = [
            recall_at_k([h.local_id for h in results[own][i].hits], gold, K)
            for i, (own, _, gold) in enumerate(questions)
        ]
        out = {
            "questions": len(questions),
            "chats": names,
            "R@10_alone": 100 * sum(alone) / len(alone),
            "search_ms_per_chat_question": 1000 * search_s / (len(questions) * len(names)),
            "across": {},
        }
        settings_tried = [(by, None, None) for by in MERGE_BY] + [
            ("gated", t, w) for t in (0.05, 0.1, 0.2, 0.5, 1e9) for w in (0.0, 1.0, 2.0, 3.0, 5.0)
        ]
        for by, temperature, name_weight in settings_tried:
            recalls, own_share = [], []
            for i, (own, question, gold) in enumerate(questions):
                named = {
                    n: len(results[n][i].query_info.get("persons", []))
                    + len(results[n][i].query_info.get("entities", []))
                    for n in names
                }
                merged = merge(
                    retriever,
                    question,
                    {n: results[n][i].hits for n in names},
                    K,
                    by,
                    qvec=qvecs[i],
                    named=named,
                    temperature=temperature,
                    name_weight=name_weight,
                )
                recalls.append(
                    recall_at_k([h.hit.local_id if h.chat == own else h.message_id for h in merged], gold, K)
                )
                own_share.append(sum(h.chat == own for h in merged) / len(merged))
            r10 = 100 * sum(recalls) / len(recalls)
            label = by if temperature is None else f"gated T={temperature} names={name_weight}"
            out["across"][label] = {
                "R@10": r10,
                "drop_points": out["R@10_alone"] - r10,
                "own_chat_share_of_top10": 100 * sum(own_share) / len(own_share),
            }
    print(
        f"{out['questions']} questions of {len(names)} train chats; R@10 asked of its own chat: {out['R@10_alone']:.1f}"
    )
    print(f"{'merge':<30} {'R@10 across 7':>14} {'drop':>6} {'own chat in top 10 %':>21}")
    for by, row in out["across"].items():
        print(f"{by:<30} {row['R@10']:>14.1f} {row['drop_points']:>6.1f} {row['own_chat_share_of_top10']:>21.1f}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
