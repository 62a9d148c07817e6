"""Answer accuracy on the TRAIN chats, offline: token F1 and containment against the gold answers
(LoCoMo-style normalization), per category and per chat, with seed 002's answer KPIs; beside the
same measures of the answers of an earlier commit (default e4d709d, whose answers quoted evidence
messages), run in the same benchmark run on the same index.

    .venv/bin/python benchmarks/answers.py [--profile balanced] [--baseline e4d709d]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

# Run inside the baseline's source tree: its agent's answer per gold question, as JSON lines.
BASELINE_SCRIPT = """
import json, sys
from pathlib import Path
from narrative_mirror.chats import load_chat
from narrative_mirror.embedding import Embedder
from narrative_mirror.gold import gold_qa_frame
from narrative_mirror.index_store import IndexStore
from narrative_mirror.query import ask
from narrative_mirror.retrieval.engine import Retriever
from narrative_mirror import settings
store, profile, files = sys.argv[1], sys.argv[2], sys.argv[3:]
retriever = Retriever(IndexStore(store), Embedder(), settings.load_config("retrieval"))
for path in files:
    chat = load_chat(Path(path))
    for q in gold_qa_frame(chat).iter_rows(named=True):
        print(json.dumps({"question_id": q["question_id"], "answer": ask(retriever, chat.chat_file, q["question"], profile).answer}))
"""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--profile", default="balanced")
    parser.add_argument("--baseline", default="e4d709d", help="commit whose answers are measured beside ('' = none)")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "nm_answers_cache")
    args = parser.parse_args()

    import polars as pl
    from common import DEFAULT_DATA, build_embedder, index_chat, message_vectors, open_index, run_at_commit, train_files

    from narrative_mirror import evaluation as ev
    from narrative_mirror import query, settings
    from narrative_mirror.chats import load_chat
    from narrative_mirror.gold import gold_qa_frame
    from narrative_mirror.metrics.answer_contains import answer_contains
    from narrative_mirror.metrics.answer_f1 import answer_f1, answer_tokens
    from narrative_mirror.retrieval.engine import Retriever

    files = train_files(args.data or DEFAULT_DATA)
    embedder = build_embedder()
    store_dir = Path(tempfile.mkdtemp(prefix="nm_answers_")) / "lancedb"
    store = open_index(store_dir)
    chats = {p.stem: load_chat(p) for p in files}
    for chat in chats.values():
        index_chat(store, chat.messages, message_vectors(chat.messages, embedder, args.cache))
    retriever = Retriever(store, embedder, settings.load_config("retrieval"))
    rows = pl.concat([
        ev.evaluate_qa(lambda q, key=key: query.ask(retriever, key, q, profile=args.profile),
                       gold_qa_frame(chat), chat.messages, "benchmark")
        for key, chat in chats.items()])

    def measures(frame: pl.DataFrame, answers: str) -> dict:
        scored = frame.with_columns(
            f1=pl.struct(answers, "gold_answer").map_elements(lambda r: answer_f1(r[answers], r["gold_answer"]),
                                                              return_dtype=pl.Float64),
            contains=pl.struct(answers, "gold_answer").map_elements(
                lambda r: answer_contains(r[answers], r["gold_answer"]), return_dtype=pl.Float64),
            words=pl.col(answers).map_elements(lambda a: float(len(answer_tokens(a))), return_dtype=pl.Float64))
        by = lambda g: {"answer_f1": round(g["f1"].mean(), 3), "answer_contains": round(g["contains"].mean(), 3),  # noqa: E731
                        "answer_words": round(g["words"].mean(), 1), "questions": g.height}
        return {"overall": by(scored),
                "per_category": {str(c): by(g) for (c,), g in sorted(scored.group_by("category"))},
                "per_chat": {k: by(g)["answer_f1"] for (k,), g in sorted(scored.group_by("chat_file"))}}

    report = {"profile": args.profile, "questions": rows.height, "now": measures(rows, "answer"),
              "kpis": {k: (round(v, 3) if isinstance(v, float) else v) for k, v in ev.answer_kpis(rows).items()}}
    if args.baseline:
        old = pl.DataFrame(run_at_commit(args.baseline, BASELINE_SCRIPT, [str(store_dir), args.profile, *map(str, files)]))
        old = old.rename({"answer": "old"})
        report[f"baseline_{args.baseline}"] = measures(rows.join(old, on="question_id"), "old")
        report["f1_ratio_now_vs_baseline"] = round(report["now"]["overall"]["answer_f1"]
                                                   / max(report[f"baseline_{args.baseline}"]["overall"]["answer_f1"], 1e-9), 2)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
