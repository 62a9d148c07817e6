"""Hard questions (issue #15), leave-one-chat-out on the TRAIN chats: for each held-out chat and
each category, the retriever's recall@10 and the agent's recall@10 / exact recall / precision,
and the ARC cases' global recall / phase coverage, beside the agent of an earlier commit (default
e4d709d, the issue's "today"), in the same run, on the same index, with held-out fusion models
fitted the same way (each chat ranked by weights fitted on the other six; the earlier commit's
on the features it knows).

    .venv/bin/python benchmarks/hard_questions.py [--profile balanced] [--baseline e4d709d] [--cache DIR]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

# Run inside the baseline's source tree: its agent's ranked and selected ids per question.
BASELINE_SCRIPT = """
import copy, json, sys
from narrative_mirror import settings
from narrative_mirror.chats import load_chat
from narrative_mirror.embedding import Embedder
from narrative_mirror.index_store import IndexStore
from narrative_mirror.query import arc, ask
from narrative_mirror.retrieval.engine import Retriever
store, profile, folds = IndexStore(sys.argv[1]), sys.argv[2], json.load(open(sys.argv[3]))
embedder = Embedder()
for job in folds:
    config = copy.deepcopy(settings.load_config("retrieval"))
    config["learned"] = job["learned"]
    retriever = Retriever(store, embedder, config)
    for question_id, question in job["questions"]:
        a = ask(retriever, job["chat_file"], question, profile)
        print(json.dumps({"question_id": question_id, "ranked": a.ranked_ids, "selected": a.selected_ids}))
    for case_id, question in job["arcs"]:
        print(json.dumps({"case_id": case_id, "phases": [p.evidence for p in arc(retriever, job["chat_file"], question, profile).phases]}))
"""
BASELINE_FEATURES = """
import json
from narrative_mirror.retrieval.learned_fusion import FEATURES
print(json.dumps({"features": list(FEATURES)}))
"""


def held_out_agent(
    store, embedder, chats, base_config: dict, models, arc_cases: dict, profile: str
) -> tuple[list, list]:
    """The agent over each chat with that chat's held-out fusion model (``models``, chat order):
    one row per question (retriever and agent R@10, exact recall, precision, the answer) and one
    per ARC case (``arc_cases``: chat file -> cases frame; global recall, phase coverage)."""
    from narrative_mirror import query
    from narrative_mirror.metrics.arc import arc_case_metrics
    from narrative_mirror.metrics.per_question import question_metrics
    from narrative_mirror.metrics.recall_at_k import recall_at_k
    from narrative_mirror.retrieval.engine import Retriever

    rows, arc_rows = [], []
    for chat, model in zip(chats, models):
        config = copy.deepcopy(base_config)
        config["learned"] = model.to_config()
        retriever = Retriever(store, embedder, config)
        positions = dict(zip(chat.messages["local_id"].to_list(), chat.messages["position"].to_list()))
        for q in chat.questions.iter_rows(named=True):
            answer = query.ask(retriever, chat.chat_file, q["question"], profile=profile)
            first = [h.local_id for h in retriever.search(chat.chat_file, q["question"], k=10).hits]
            now = question_metrics(answer.ranked_ids, answer.selected_ids, q["gold_ids"], positions)
            rows.append(
                {
                    "question_id": q["question_id"],
                    "chat": chat.chat_file,
                    "category": q["category"],
                    "retriever_r10": recall_at_k(first, q["gold_ids"], 10),
                    "r10": now["recall@10"],
                    "exact": now["exact_recall"],
                    "precision": now["precision"],
                    "gold_ids": q["gold_ids"],
                    "positions": positions,
                    "answer": answer.answer,
                    "abstained": answer.abstained,
                }
            )
        for case in arc_cases[chat.chat_file].iter_rows(named=True) if chat.chat_file in arc_cases else []:
            phases = [p.evidence for p in query.arc(retriever, chat.chat_file, case["query"], profile=profile).phases]
            arc_rows.append(
                {
                    "case_id": case["case_id"],
                    "chat": chat.chat_file,
                    "gold": case["phase_evidence"],
                    **arc_case_metrics(case["phase_evidence"], phases),
                }
            )
    return rows, arc_rows


MEASURES = ("retriever_r10", "base_r10", "base_exact", "base_precision", "r10", "exact", "precision")
ARC_MEASURES = ("base_global_recall", "base_phase_coverage", "global_recall", "phase_coverage")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument(
        "--arcs", type=Path, default=None, help="ARC cases folder (default: realtalk_arcs beside the data)"
    )
    parser.add_argument("--profile", default="balanced")
    parser.add_argument("--baseline", default="e4d709d", help="commit measured beside ('' = none)")
    parser.add_argument("--cache", type=Path, default=None, help="folder to cache message vectors between runs")
    parser.add_argument("--l2", type=float, default=1e-3)
    args = parser.parse_args(argv)

    import polars as pl
    from common import DEFAULT_DATA, build_embedder, open_index, run_at_commit
    from retrieval_variants import load_train
    from train_fusion import TrainingPools

    from narrative_mirror import settings
    from narrative_mirror.arcs import arcs_file_for, load_arc_cases
    from narrative_mirror.metrics.arc import arc_case_metrics
    from narrative_mirror.metrics.per_question import question_metrics
    from narrative_mirror.retrieval.engine import Retriever
    from narrative_mirror.retrieval.learned_fusion import FEATURES

    embedder = build_embedder()
    store_dir = Path(tempfile.mkdtemp(prefix="nm_hard_")) / "lancedb"
    store = open_index(store_dir)
    chats = load_train(args.data or DEFAULT_DATA, embedder, store, args.cache)
    base_config = settings.load_config("retrieval")
    pools = TrainingPools.collect(Retriever(store, embedder, base_config), chats)
    models = pools.leave_one_chat_out(args.l2)
    arcs_dir = args.arcs or (args.data or DEFAULT_DATA).parent / "realtalk_arcs"
    arc_cases = {
        chat.chat_file: load_arc_cases(path, chat.messages)
        for chat in chats
        if (path := arcs_file_for(arcs_dir, chat.chat_file))
    }
    folds = [
        {
            "chat_file": chat.chat_file,
            "learned": model.to_config(),
            "questions": chat.questions.select("question_id", "question").rows(),
            "arcs": arc_cases[chat.chat_file].select("case_id", "query").rows() if chat.chat_file in arc_cases else [],
        }
        for chat, model in zip(chats, models)
    ]

    rows, arc_rows = held_out_agent(store, embedder, chats, base_config, models, arc_cases, args.profile)
    frame = pl.DataFrame([{k: v for k, v in r.items() if k != "positions"} for r in rows])
    arc_frame = pl.DataFrame([{k: v for k, v in r.items() if k != "gold"} for r in arc_rows])
    if args.baseline:
        # The baseline's held-out models are fitted the same way, on the features it knows.
        known = run_at_commit(args.baseline, BASELINE_FEATURES, [])[0]["features"]
        base_models = pools.leave_one_chat_out(args.l2, features=[f for f in FEATURES if f in known])
        folds_file = store_dir.parent / "folds.json"
        folds_file.write_text(
            json.dumps([fold | {"learned": model.to_config()} for fold, model in zip(folds, base_models)])
        )
        printed = run_at_commit(args.baseline, BASELINE_SCRIPT, [str(store_dir), args.profile, str(folds_file)])
        old = {r["question_id"]: r for r in printed if "question_id" in r}
        old_arcs = {r["case_id"]: r["phases"] for r in printed if "case_id" in r}
        base = [
            question_metrics(
                old[r["question_id"]]["ranked"], old[r["question_id"]]["selected"], r["gold_ids"], r["positions"]
            )
            for r in rows
        ]
        frame = frame.with_columns(
            base_r10=pl.Series([m["recall@10"] for m in base]),
            base_exact=pl.Series([m["exact_recall"] for m in base]),
            base_precision=pl.Series([m["precision"] for m in base]),
        )
        if arc_rows:
            base_arc = [arc_case_metrics(r["gold"], old_arcs[r["case_id"]]) for r in arc_rows]
            arc_frame = arc_frame.with_columns(
                **{
                    f"base_{k}": pl.Series([m[k] for m in base_arc], dtype=pl.Float64)
                    for k in ("global_recall", "phase_coverage")
                }
            )

    def table(data: pl.DataFrame, by: str, unit: str, known: tuple[str, ...]) -> pl.DataFrame:
        measures = [m for m in known if m in data.columns]
        parts = [
            data.group_by(by)
            .agg(pl.len().alias(unit), *[pl.col(m).mean().round(3) for m in measures])
            .sort(by)
            .with_columns(pl.col(by).cast(pl.String)),
            data.select(pl.lit("all").alias(by), pl.len().alias(unit), *[pl.col(m).mean().round(3) for m in measures]),
        ]
        return pl.concat(parts)

    pl.Config.set_tbl_rows(20)
    pl.Config.set_tbl_cols(-1)
    pl.Config.set_tbl_hide_dataframe_shape(True)
    pl.Config.set_tbl_width_chars(200)
    print(f"leave-one-chat-out, agent {args.profile!r}, offline; base_* = {args.baseline or '(none)'} in the same run")
    print(table(frame, "category", "questions", MEASURES))
    print(table(frame, "chat", "questions", MEASURES))
    if arc_rows:
        print(table(arc_frame, "chat", "cases", ARC_MEASURES))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
