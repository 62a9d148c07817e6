"""The ``narrative-mirror`` command: the asset graph for people and scripts without the UI.

Readable output for people (progress on stderr), one JSON object on stdout with ``--json``.
Exit codes: 0 ok, 1 a run failed, 2 bad input (argument, file or configuration).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

INGEST = ["messages", "gold_qa", "arc_cases"]
LAYERS = ["message_embeddings", "l1_topics", "l15_signals", "l2_threads", "lancedb_index"]


def _runner(args):
    from jobs.runner import Runner

    return Runner(data_dir=args.data, arcs_dir=getattr(args, "arcs", None))


def cmd_ingest(args) -> dict:
    runner = _runner(args)
    keys = runner.register()
    runner.materialize(INGEST, keys)
    runner.materialize(["split"], None)
    msgs = qa = arcs = unresolved = 0
    per_file = {}
    for key in keys:
        m, q, a = (runner.read(name, key) for name in INGEST)
        n_unresolved = int(q["unresolved"].list.len().sum() or 0)
        per_file[key] = {"messages": m.height, "qa": q.height, "arc_cases": a.height,
                         "unresolved_evidence": n_unresolved}
        msgs, qa, arcs = msgs + m.height, qa + q.height, arcs + a.height
        unresolved += n_unresolved
    return {
        "data": str(runner.data_dir),
        "partitions": len(keys),
        "messages": msgs,
        "qa": qa,
        "arc_cases": arcs,
        "unresolved_evidence": unresolved,
        "per_file": per_file,
    }


def cmd_build(args) -> dict:
    runner = _runner(args)
    keys = runner.register()
    seconds = runner.materialize(INGEST + LAYERS, keys)
    runner.materialize(["split"], None)
    counts = {"messages": 0, "blocks": 0, "threads": 0, "messages_in_blocks": 0}
    per_file = {}
    for key in keys:
        msgs, blocks, threads = (runner.read(a, key) for a in ("messages", "l1_topics", "l2_threads"))
        ids = [i for row in blocks["message_ids"].to_list() for i in row]
        # "in exactly one block": ids listed once, and every message listed.
        exactly_once = len(set(ids) & set(msgs["local_id"].to_list())) if len(ids) == len(set(ids)) else 0
        row = {"messages": msgs.height, "blocks": blocks.height, "threads": threads.height,
               "messages_in_blocks": exactly_once}
        per_file[key] = row
        for name, value in row.items():
            counts[name] += value
    return {"data": str(runner.data_dir), "partitions": len(keys), **counts,
            "seconds": {k: round(v, 3) for k, v in seconds.items()}, "per_file": per_file}


EVAL = ["qa_eval", "arc_eval"]


def _split_keys(runner, keys: list[str], which: str, allow_test: bool) -> dict[str, list[str]]:
    from narrative_mirror import split as split_lib

    chosen = {w: split_lib.keys_in(w, keys) for w in ("train", "test") if which in (w, "all")}
    if chosen.get("test") and not allow_test:
        raise ValueError(
            f"--split {which} touches test chat files {chosen['test']}: pass --allow-test to evaluate them "
            "(test files are for checking a finished change, never for choosing among variants; "
            "the run is recorded in the experiment log)"
        )
    return chosen


def _current_fingerprint(runner) -> str:
    from narrative_mirror import evaluation as ev

    cfg = ev.load_eval_config()
    llm = runner.resources["llm"].get()
    return ev.config_fingerprint(runner.resources["embedder"].get().fingerprint,
                                 getattr(llm, "fingerprint", None), cfg["run"]["profile"], cfg["run"]["mode"])


def cmd_eval(args) -> dict:
    import os

    from assets.evaluation import TEST_TAG
    if args.profile:
        os.environ["NM_EVAL_PROFILE"] = args.profile
    runner = _runner(args)
    keys = runner.register()
    chosen = _split_keys(runner, keys, args.split, args.allow_test)
    targets = [k for ks in chosen.values() for k in ks]
    runner.materialize(INGEST + LAYERS, targets)
    runner.materialize(["split"], None)
    fingerprint = _current_fingerprint(runner)["fingerprint"]
    for which, split_keys in chosen.items():
        for key in split_keys:
            stored = runner.stored("qa_eval", key)
            # Evaluated under another config (e.g. --profile) counts as stale too.
            force = stored is not None and stored.height > 0 and stored["fingerprint"][0] != fingerprint
            runner.materialize(EVAL, [key], tags={TEST_TAG: which}, force=force)
    runner.materialize(["eval_summary"], None, force=True)
    result = {"split": args.split, **_split_metrics(runner, targets), "fingerprint": fingerprint}
    if args.split == "all":
        result["per_split"] = {which: _split_metrics(runner, ks) for which, ks in chosen.items() if ks}
    return result


def _split_metrics(runner, keys: list[str]) -> dict:
    """QA and ARC metrics over the stored evaluations of ``keys``."""
    import polars as pl

    from narrative_mirror import evaluation as ev

    summary = ev.qa_summary(pl.concat([runner.read("qa_eval", k) for k in keys]))
    overall = summary["overall"]
    arcs = pl.concat([runner.read("arc_eval", k) for k in keys])
    arc_overall = ev.arc_summary(arcs)["overall"] if arcs.height else {}
    return {
        "chat_files": keys,
        "questions": overall["count"],
        **{k: overall[k] for k in ev.HEADLINE_KEYS},
        "arc_cases": arc_overall.get("count", 0),
        **{k: arc_overall.get(k) for k in ev.ARC_KEYS.values()},
        "lost_at_stage": summary["lost"],
        "per_category": {str(c): st for c, st in summary["groups"].items()},
    }


def _print_eval(result: dict) -> None:
    from narrative_mirror import evaluation as ev

    splits = result.get("per_split") or {result["split"]: result}
    rows = [{"split": which, "chat files": len(m["chat_files"]), "questions": m["questions"],
             **{k: m[k] for k in ev.HEADLINE_KEYS}, "arc recall": m["arc_global_recall"],
             "arc coverage": m["arc_phase_coverage"]} for which, m in splits.items()]
    print(ev.markdown_table(rows))
    print(f"gold ids lost at: {result['lost_at_stage']}   (config fingerprint {result['fingerprint']})")


def cmd_demo(args) -> dict:
    """The main job on the packaged demo data: build, evaluate train and test, summarize."""
    args.split, args.allow_test, args.profile = "all", True, None
    result = cmd_eval(args)
    return result


def _retriever_for(args):
    """Build what the chat needs (only if stale), then a retriever over the index."""
    from narrative_mirror import settings
    from narrative_mirror.retrieval.engine import Retriever

    runner = _runner(args)
    keys = runner.register()
    if args.chat not in keys:
        raise ValueError(f"--chat {args.chat!r}: no such chat file in {runner.data_dir} (known: {', '.join(keys)})")
    runner.materialize(INGEST + LAYERS, [args.chat])
    res = runner.resources
    retriever = Retriever(res["lancedb"].get(), res["embedder"].get(), settings.load_config("retrieval"))
    return retriever, res["llm"].get()


def cmd_ask(args) -> dict:
    from narrative_mirror import settings
    from narrative_mirror.events import EventLog
    from narrative_mirror.logged_query import ask_logged

    retriever, llm = _retriever_for(args)
    event_log = EventLog(settings.lancedb_uri(), embedder=retriever.embedder)
    try:
        answer, event_id = ask_logged(retriever, args.chat, args.question, args.profile, llm,
                                      "oneshot" if args.oneshot else "agent", event_log, user_id=args.user)
    finally:
        event_log.close()  # writes the queued event before the process ends
    texts = {e.id: e for e in answer.evidence}
    return {
        "answer": answer.answer,
        "evidence": [{"id": e.id, "text": e.text, "point": e.point} for e in texts.values()],
        "unknowns": answer.unknowns,
        "route": answer.route,
        "profile": answer.profile,
        "stop_reason": answer.stop_reason,
        "degraded": answer.degraded,
        "degraded_reason": answer.degraded_reason,
        "phases": [p.model_dump() for p in answer.phases],
        "event_id": event_id,
    }


def cmd_serve(args) -> dict:
    from narrative_mirror import settings
    from narrative_mirror.api_server import create_app, serve
    from narrative_mirror.events import EventLog
    from narrative_mirror.retrieval.engine import Retriever

    runner = _runner(args)
    keys = runner.register()
    runner.materialize(INGEST + LAYERS, keys)
    res = runner.resources
    retriever = Retriever(res["lancedb"].get(), res["embedder"].get(), settings.load_config("retrieval"))
    event_log = EventLog(settings.lancedb_uri(), embedder=retriever.embedder)
    runner.progress(f"serving {len(keys)} chat files on http://{args.host}:{args.port} (Ctrl-C stops)")
    serve(create_app(retriever, event_log, res["llm"].get()), host=args.host, port=args.port)
    return {"served": keys}


def cmd_compare_run(args) -> dict:
    from narrative_mirror.recall_runs import compare_run

    return {"run": str(args.run_file), **compare_run(args.run_file)}


def cmd_experiments(args) -> dict:
    from narrative_mirror import experiments

    if args.csv:
        experiments.export_csv(args.csv)
    rows = experiments.flat_rows(experiments.read())
    return {"experiments": len(rows), "log": str(experiments.log_path()),
            "csv": str(args.csv) if args.csv else None, "latest": rows[-5:]}


def cmd_backfill_test(args) -> dict:
    """Launch the test evaluation as a Dagster backfill over exactly the test chat files."""
    import os
    import subprocess
    import sys
    from pathlib import Path as _Path

    from narrative_mirror import split as split_lib

    runner = _runner(args)
    keys = split_lib.keys_in("test", runner.register())
    if not keys:
        raise ValueError(f"no test chat files in {runner.data_dir}")
    command = [str(_Path(sys.executable).parent / "dagster"), "job", "backfill", "-m", "definitions",
               "-j", "test_eval_job", "--partitions", ",".join(keys), "--noprompt"]
    if not args.launch:
        return {"test_partitions": keys, "command": " ".join(command), "launched": False}
    env = {**os.environ, "NM_DATA_DIR": str(runner.data_dir), "DAGSTER_HOME": os.environ["DAGSTER_HOME"]}
    proc = subprocess.run(command, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ValueError(f"dagster job backfill failed: {proc.stderr.strip()[-2000:]}")
    return {"test_partitions": keys, "command": " ".join(command), "launched": True,
            "note": "the backfill daemon (dg dev / dagster-daemon) runs it; see the UI's Backfills tab"}


def cmd_arc(args) -> dict:
    from narrative_mirror import query

    retriever, llm = _retriever_for(args)
    answer = query.arc(retriever, args.chat, args.question, profile=args.profile, llm=llm)
    return {"question": args.question, "route": answer.route, "profile": answer.profile,
            "phases": [p.model_dump() for p in answer.phases], "unknowns": answer.unknowns,
            "degraded": answer.degraded}


def cmd_trace(args) -> dict:
    from narrative_mirror import query

    retriever, llm = _retriever_for(args)
    trace = query.trace(retriever, args.chat, args.question, profile=args.profile, llm=llm)
    out = trace.model_dump()
    if args.gold:
        from narrative_mirror.metrics import attribute_losses

        gold = [g.strip() for g in args.gold.split(",") if g.strip()]
        out["gold"] = attribute_losses(gold, [c.id for c in trace.candidates],
                                       [r.id for r in trace.reranked][:10], [f.id for f in trace.final])
    return out


def _print_answer(result: dict) -> None:
    print(f"Answer: {result['answer']}")
    print("Evidence:")
    for e in result["evidence"]:
        print(f"  [{e['id']}] {e['text']}\n      -> {e['point']}")
    print("Unknowns:" + ("" if result["unknowns"] else " none"))
    for u in result["unknowns"]:
        print(f"  - {u}")
    print(f"(route {result['route']}, profile {result['profile']}, stop: {result['stop_reason']}"
          + (f", DEGRADED: {result['degraded_reason']}" if result["degraded"] else "") + ")")


def _print_phases(result: dict) -> None:
    for i, phase in enumerate(result["phases"], 1):
        print(f"{i}. {phase['name']}: {phase['summary']}\n   evidence: {', '.join(phase['evidence'])}")
    for u in result["unknowns"]:
        print(f"  unknown: {u}")


def _print_trace(result: dict) -> None:
    for stage in ("candidates", "reranked", "final"):
        items = result[stage]
        print(f"{stage} ({len(items)}): " + ", ".join(f"{r['id']}={r['score']:.3f}" for r in items[:25])
              + (" ..." if len(items) > 25 else ""))
    for gold_id, stage in (result.get("gold") or {}).items():
        print(f"gold {gold_id}: {stage}")


def _print_human(command: str, result: dict) -> None:
    special = {"ask": _print_answer, "arc": _print_phases, "trace": _print_trace, "eval": _print_eval,
               "demo": _print_eval}
    if command in special:
        special[command](result)
        return
    print(f"{command}: " + ", ".join(f"{k}={v}" for k, v in result.items() if not isinstance(v, (dict, list))))
    for key, row in (result.get("per_file") or {}).items():
        print(f"  {key}: " + ", ".join(f"{k}={v}" for k, v in row.items()))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="narrative-mirror", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def data_args(p):
        p.add_argument("--data", type=Path, default=None,
                       help="folder of chat files (default: NM_DATA_DIR, else the packaged demo chats)")
        p.add_argument("--arcs", type=Path, default=None,
                       help="folder of <chat>.arcs.json (default: NM_ARCS_DIR, the data folder, or <data>_arcs)")
        p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("ingest", help="register chat files and materialize messages, gold QA, ARC cases")
    data_args(p)
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("build", help="ingest (if needed) and materialize all layers and the index; only stale work is redone")
    data_args(p)
    p.set_defaults(func=cmd_build)
    p = sub.add_parser("eval", help="build what is stale, evaluate a split (QA + ARC), print its metrics")
    data_args(p)
    p.add_argument("--split", choices=["train", "test", "all"], required=True)
    p.add_argument("--allow-test", action="store_true", help="required for any run that touches a test chat file")
    p.add_argument("--profile", choices=["fast", "balanced", "deep"], default=None,
                   help="agent profile (default: config/evaluation.toml)")
    p.set_defaults(func=cmd_eval)

    def question_args(p):
        data_args(p)
        p.add_argument("--chat", required=True, help="partition key of the chat file (its file stem)")
        p.add_argument("--profile", choices=["fast", "balanced", "deep"], default="balanced")
        p.add_argument("question")

    p = sub.add_parser("ask", help="answer a question about one chat: Answer / Evidence / Unknowns")
    question_args(p)
    p.add_argument("--oneshot", action="store_true", help="the deprecated one-shot path, for comparison")
    p.add_argument("--user", default="anonymous", help="user id recorded in the retrieval event")
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("arc", help="tell a story of one chat as chronological phases with evidence ids")
    question_args(p)
    p.set_defaults(func=cmd_arc)

    p = sub.add_parser("trace", help="the three debug checkpoints (candidates, after rerank, final selection)")
    question_args(p)
    p.add_argument("--gold", default="", help="comma-separated gold ids: say where each was lost")
    p.set_defaults(func=cmd_trace)

    p = sub.add_parser("serve", help="HTTP search API: GET /api/memory/search, POST /api/ask (loopback by default)")
    data_args(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("compare-run", help="before/after rerank of a recall-run file (average top-3 score lift)")
    p.add_argument("run_file", type=Path)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_compare_run)

    p = sub.add_parser("experiments", help="show the experiment log; --csv FILE exports it")
    p.add_argument("--csv", type=Path, default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_experiments)

    p = sub.add_parser("backfill-test", help="print (or --launch) the Dagster backfill evaluating exactly the test files")
    data_args(p)
    p.add_argument("--launch", action="store_true", help="submit it to the Dagster instance in NM_HOME")
    p.set_defaults(func=cmd_backfill_test)

    p = sub.add_parser("demo", help="the main job: build and evaluate the packaged demo chats offline")
    data_args(p)
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    from jobs.runner import RunFailed

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = args.func(args)
    except RunFailed as exc:
        print(f"narrative-mirror {args.command}: {exc}", file=sys.stderr)
        return 1
    except (FileNotFoundError, ValueError) as exc:
        print(f"narrative-mirror {args.command}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, default=str))
    else:
        _print_human(args.command, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
