"""The ``narrative-mirror`` command: the asset graph for people and scripts without the UI.

Readable output for people (progress on stderr), one JSON object on stdout with ``--json``,
always, with ``problems`` (bad input: one line per file naming the field) and ``failures``.
Exit codes: 0 ok, 2 bad input (an argument, a chat/ARC/config file), 1 anything else failed,
130 stopped by Ctrl-C or SIGTERM (the run in progress is marked canceled, no further one starts).
Good files are processed whatever the bad ones do; tracebacks only with ``--verbose`` (and in
the Dagster run logs).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

INGEST = ["messages", "gold_qa", "arc_cases", "split"]
LAYERS = ["message_embeddings", "l1_topics", "l15_signals", "l2_threads", "lancedb_index"]
EVAL = ["qa_eval", "arc_eval"]


def _runner(args, eval_profile: str = ""):
    from cli.runner import Runner

    return Runner(data_dir=args.data, arcs_dir=getattr(args, "arcs", None), eval_profile=eval_profile,
                  verbose=getattr(args, "verbose", False))


def _outcome(runner, *reports) -> dict:
    """What went wrong across a command's reports, as the lines the command prints."""
    problems = list(runner.problems)
    failures, warnings = [], []
    for report in reports:
        problems += report.problems.values()
        failures += [f"{key or '(all)'}: {message}" for key, message in report.failures.items()]
        warnings += report.warnings
    return {"problems": problems, "failures": failures, "warnings": warnings}


def _build_memory(runner, chats: list[str] | None = None):
    """Ingest and layers of every chat file (or of ``chats``), then a freshness stamp per chat so
    that questions about it skip Dagster until something changes (cli/stamp.py).
    Returns (all chat files, the BuildReport)."""
    from cli import stamp
    from narrative_mirror.keys import find_chat_files

    # Versions taken before Dagster observes them: a file edited during the build is never stamped fresh.
    files = find_chat_files(runner.data_dir)[0]
    before = {k: stamp.sources_now(p) for k, p in files.items() if chats is None or k in chats}
    keys = runner.register()
    unknown = sorted(set(chats or ()) - set(keys))
    if unknown:
        raise ValueError(f"--chat {unknown[0]!r}: no such chat file in {runner.data_dir} (known: {', '.join(keys)})")
    targets = keys if chats is None else list(chats)
    report = runner.materialize(INGEST + LAYERS, targets, what="memory")
    for key in targets:
        if key in before and key not in report.failed:
            stamp.write(runner.state.root, key, before[key])
    if report.ran:
        _tidy_index(runner)
    return keys, report


# Every chat write leaves a small file in each LanceDB table: past this many, a build compacts
# them itself rather than waiting for the nightly maintenance job.
MAX_FRAGMENTS = 64


def _tidy_index(runner) -> None:
    store = runner.resource("lancedb").get()
    if any(table["fragments"] > MAX_FRAGMENTS for table in store.health().values()):
        runner.progress(f"LanceDB: more than {MAX_FRAGMENTS} files in a table: compacting")
        store.maintain()


def _partition_rows(report, keys: list[str]) -> dict:
    """Per chat file: the assets this command ran, and how many messages it encoded."""
    return {key: {"ran": report.ran.get(key, []), "encoded_messages": report.encoded_messages.get(key, 0)}
            for key in keys}


def cmd_ingest(args) -> dict:
    with _runner(args) as runner:
        keys = runner.register()
        report = runner.materialize(INGEST, keys, what="ingest")
        msgs = qa = arcs = unresolved = 0
        per_file = {}
        for key in (k for k in keys if k not in report.failed):
            m, q, a = (runner.read(name, key) for name in ("messages", "gold_qa", "arc_cases"))
            n_unresolved = int(q["unresolved"].list.len().sum() or 0)
            per_file[key] = {"messages": m.height, "qa": q.height, "arc_cases": a.height,
                             "unresolved_evidence": n_unresolved, "ran": report.ran.get(key, [])}
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
        **_outcome(runner, report),
    }


def cmd_build(args) -> dict:
    with _runner(args) as runner:
        keys, report = _build_memory(runner)
        counts = {"messages": 0, "blocks": 0, "threads": 0, "messages_in_blocks": 0}
        built = [k for k in keys if k not in report.failed]
        per_file = _partition_rows(report, built)
        for key in built:
            msgs, blocks, threads = (runner.read(a, key) for a in ("messages", "l1_topics", "l2_threads"))
            ids = [i for row in blocks["message_ids"].to_list() for i in row]
            # "in exactly one block": ids listed once, and every message listed.
            exactly_once = len(set(ids) & set(msgs["local_id"].to_list())) if len(ids) == len(set(ids)) else 0
            row = {"messages": msgs.height, "blocks": blocks.height, "threads": threads.height,
                   "messages_in_blocks": exactly_once}
            per_file[key].update(row)
            for name, value in row.items():
                counts[name] += value
    return {"data": str(runner.data_dir), "partitions": len(keys), **counts,
            "encoded_messages": sum(report.encoded_messages.values()),
            "seconds": {k: round(v, 3) for k, v in report.seconds.items()}, "per_file": per_file,
            **_outcome(runner, report)}


def _split_keys(keys: list[str], which: str, allow_test: bool) -> dict[str, list[str]]:
    from narrative_mirror import split as split_lib

    chosen = {w: split_lib.keys_in(w, keys) for w in ("train", "test") if which in (w, "all")}
    if chosen.get("test") and not allow_test:
        raise ValueError(
            f"--split {which} touches test chat files {chosen['test']}: pass --allow-test to evaluate them "
            "(test files are for checking a finished change, never for choosing among variants; "
            "the run is recorded in the experiment log)"
        )
    return chosen


def _current_fingerprint(runner) -> dict:
    from narrative_mirror import evaluation as ev

    cfg = runner.resource("evaluation").config()
    llm = runner.resource("llm").get()
    return ev.config_fingerprint(runner.resource("embedder").get().fingerprint,
                                 getattr(llm, "fingerprint", None), cfg["run"]["profile"], cfg["run"]["mode"])


def cmd_eval(args) -> dict:
    from assets.evaluation import TEST_TAG

    with _runner(args, eval_profile=args.profile or "") as runner:
        keys = runner.register()
        chosen = _split_keys(keys, args.split, args.allow_test)
        _, memory = _build_memory(runner, [k for ks in chosen.values() for k in ks])
        chosen = {which: [k for k in ks if k not in memory.failed] for which, ks in chosen.items()}
        fingerprint = _current_fingerprint(runner)["fingerprint"]
        reports = [memory]
        for which, split_keys in chosen.items():
            # Evaluated under another config (e.g. --profile): Dagster does not track the profile
            # chosen on the command line, so those are run again explicitly.
            other = [k for k in split_keys if (stored := runner.stored("qa_eval", k)) is not None
                     and stored.height > 0 and stored["fingerprint"][0] != fingerprint]
            if other:
                reports.append(runner.materialize(EVAL, other, tags={TEST_TAG: which}, force=True, what="evaluation"))
            reports.append(runner.materialize(EVAL, split_keys, tags={TEST_TAG: which}, what="evaluation"))
        reports.append(runner.materialize(["eval_summary"], None, force=True, what="summary"))
        evaluated = {which: [k for k in ks if not any(k in r.failed for r in reports)] for which, ks in chosen.items()}
        targets = [k for ks in evaluated.values() for k in ks]
        result = {"split": args.split, **_split_metrics(runner, targets), "fingerprint": fingerprint,
                  **_outcome(runner, *reports)}
        if args.split == "all":
            result["per_split"] = {which: _split_metrics(runner, ks) for which, ks in evaluated.items() if ks}
    return result


def _split_metrics(runner, keys: list[str]) -> dict:
    """QA and ARC metrics over the stored evaluations of ``keys``."""
    import polars as pl

    from narrative_mirror import evaluation as ev

    if not keys:
        return {"chat_files": [], "questions": 0}
    summary = ev.qa_summary(pl.concat([runner.read("qa_eval", k) for k in keys]))
    overall = summary["overall"]
    arcs = pl.concat([runner.read("arc_eval", k) for k in keys])
    arc_overall = ev.arc_summary(arcs)["overall"] if arcs.height else {}
    return {
        "chat_files": keys,
        "questions": overall["count"],
        **{k: overall[k] for k in ev.HEADLINE_KEYS},
        **{k: overall[k] for k in ev.KPI_KEYS},
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
             "arc coverage": m["arc_phase_coverage"]} for which, m in splits.items() if m["questions"]]
    print(ev.markdown_table(rows))
    print(ev.markdown_table([{"split": which, **{k: m[k] for k in ev.KPI_KEYS}} for which, m in splits.items()
                             if m["questions"]]))
    for which, m in splits.items():
        if m["questions"]:
            print(f"{which}, per category:")
            print(ev.markdown_table([{"category": c, "questions": st["count"], **{k: st[k] for k in ev.HEADLINE_KEYS}}
                                     for c, st in sorted(m["per_category"].items())]))
    print(f"gold ids lost at: {result['lost_at_stage']}   (config fingerprint {result['fingerprint']})")


def cmd_protocol(args) -> dict:
    """Seed 002's three-profile protocol over the TRAIN chat files, with its adoption gate."""
    from narrative_mirror import split as split_lib

    with _runner(args) as runner:
        keys = runner.register()
        train = split_lib.keys_in(split_lib.TRAIN, keys)
        _, memory = _build_memory(runner, train)
        report = runner.materialize(["profile_protocol"], None, force=True, what="protocol")
        table = runner.read("profile_protocol", None).to_dicts()
        gate = runner.last_check("profile_protocol", "adoption_gate")
    return {"train_chat_files": [k for k in train if k not in memory.failed], "profiles": table,
            "adoption_gate": gate, **_outcome(runner, memory, report)}


def _print_protocol(result: dict) -> None:
    from narrative_mirror.evaluation import markdown_table

    print(markdown_table(result["profiles"]))
    gate = result["adoption_gate"] or {}
    print(f"adoption gate: {'holds' if gate.get('passed') else 'does not hold'}: {gate.get('description', '')}")


def cmd_demo(args) -> dict:
    """The main job on the packaged demo data: build, evaluate train and test, summarize."""
    args.split, args.allow_test, args.profile = "all", True, None
    return cmd_eval(args)


def _fresh_memory(args) -> None:
    """Make sure the chat's memory is built and fresh. Cheap when it is: a freshness stamp
    (cli/stamp.py) is compared without starting Dagster; otherwise Dagster rebuilds what is
    stale, with progress, and the stamp is renewed."""
    from cli import stamp
    from narrative_mirror.keys import find_chat_files
    from resources import environment

    data_dir = args.data.resolve() if args.data else environment.data_dir()
    path = find_chat_files(data_dir)[0].get(args.chat)
    if path is not None and stamp.is_fresh(environment.nm_home(), args.chat, path):
        return
    with _runner(args) as runner:
        _, report = _build_memory(runner, [args.chat])
    if args.chat in report.problems:
        raise ValueError(report.problems[args.chat])
    if args.chat in report.failures:
        raise RuntimeError(f"the memory of {args.chat} could not be built: {report.failures[args.chat]}")


def _memory_for(args):
    """The chat's fresh memory: a retriever and the LLM client (None = offline), built from the
    process's resources as the asset graph builds them."""
    from resources import default_resources, resolved, retriever

    _fresh_memory(args)
    resources = default_resources()
    return retriever(resolved(resources["lancedb"]), resources["embedder"]), resolved(resources["llm"]).get()


def cmd_ask(args) -> dict:
    from narrative_mirror.logged_query import ask_logged
    from resources import event_log as event_log_of

    retriever, llm = _memory_for(args)
    event_log = event_log_of(retriever)
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
    from narrative_mirror.access import load_tokens
    from narrative_mirror.api_server import check_host, create_app, serve
    from resources import event_log as event_log_of
    from resources import retriever as retriever_of

    tokens = load_tokens(args.tokens) if args.tokens else None
    check_host(args.host, tokens is not None)  # before the build, not after it
    with _runner(args) as runner:  # the home is free again while serving
        keys, report = _build_memory(runner)
    unavailable = {key: message for key, message in {**report.problems, **report.failures}.items() if key}
    for line in runner.problems:
        runner.progress(f"skipped: {line}")
    retriever = retriever_of(runner.resource("lancedb"), runner.resource("embedder"))
    event_log = event_log_of(retriever)  # where `ask` logs too
    runner.progress(f"serving {len(keys)} chat files on http://{args.host}:{args.port} (Ctrl-C stops)")
    app = create_app(retriever, event_log, runner.resource("llm").get(), unavailable=unavailable, tokens=tokens)
    serve(app, host=args.host, port=args.port)
    return {"served": [k for k in keys if k not in unavailable]}


def cmd_maintain(args) -> dict:
    """LanceDB upkeep now (what `index_maintenance_job` does nightly under the daemon)."""
    with _runner(args) as runner:  # under the home lock: no build writes meanwhile
        store = runner.resource("lancedb")
        report = store.get().maintain()
    return {"lancedb": store.resolved_uri(), **report}


def cmd_token(args) -> dict:
    """Create or revoke an API token of `serve --tokens FILE` (the file keeps only its hash)."""
    from narrative_mirror.access import add_token, remove_token

    if args.action == "add":
        if not args.chat:
            raise ValueError("token add: --chat PATTERN is required (a chat key or glob, repeatable)")
        secret = add_token(args.tokens, args.name, args.chat)
        return {"tokens": str(args.tokens), "name": args.name, "chats": args.chat, "token": secret,
                "note": "shown once: only its hash is stored"}
    if not remove_token(args.tokens, args.name):
        raise ValueError(f"{args.tokens}: no token named {args.name!r}")
    return {"tokens": str(args.tokens), "removed": args.name}


def cmd_compare_run(args) -> dict:
    from narrative_mirror.recall_runs import compare_run

    return {"run": str(args.run_file), **compare_run(args.run_file)}


def cmd_experiments(args) -> dict:
    from narrative_mirror import experiments
    from resources import StateResource, environment

    log = StateResource(home=str(environment.nm_home())).experiments_log
    if args.csv:
        experiments.export_csv(args.csv, log)
    rows = experiments.flat_rows(experiments.read(log))
    return {"experiments": len(rows), "log": str(log),
            "csv": str(args.csv) if args.csv else None, "latest": rows[-20:]}


def cmd_backfill_test(args) -> dict:
    """Launch the test evaluation as a Dagster backfill over exactly the test chat files."""
    import subprocess

    from cli.instance import dagster_home
    from narrative_mirror import split as split_lib
    from resources import environment

    with _runner(args) as runner:
        keys = split_lib.keys_in("test", runner.register())
    if not keys:
        raise ValueError(f"no test chat files in {runner.data_dir}")
    command = [str(Path(sys.executable).parent / "dagster"), "job", "backfill", "-m", "definitions",
               "-j", "test_eval_job", "--partitions", ",".join(keys), "--noprompt"]
    if not args.launch:
        return {"test_partitions": keys, "command": " ".join(command), "launched": False}
    env = environment.child_env(NM_DATA_DIR=str(runner.data_dir), DAGSTER_HOME=str(dagster_home()))
    proc = subprocess.run(command, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ValueError(f"dagster job backfill failed: {proc.stderr.strip()[-2000:]}")
    return {"test_partitions": keys, "command": " ".join(command), "launched": True,
            "note": "the backfill daemon (dg dev / dagster-daemon) runs it; see the UI's Backfills tab"}


def cmd_arc(args) -> dict:
    from narrative_mirror import query

    retriever, llm = _memory_for(args)
    answer = query.arc(retriever, args.chat, args.question, profile=args.profile, llm=llm)
    return {"question": args.question, "route": answer.route, "profile": answer.profile,
            "phases": [p.model_dump() for p in answer.phases], "unknowns": answer.unknowns,
            "degraded": answer.degraded}


def cmd_trace(args) -> dict:
    from narrative_mirror import query

    retriever, llm = _memory_for(args)
    def follow(node: str, lines: list[str]) -> None:  # the agent's nodes as they run
        for line in lines or [f"{node}: -"]:
            print(f"[{node}] {line.removeprefix(node + ': ')}", file=sys.stderr, flush=True)

    answer = query.ask(retriever, args.chat, args.question, profile=args.profile, llm=llm, on_step=follow)
    trace = answer.trace
    out = {"route": answer.route, **trace.model_dump()}
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


TRACE_ROWS = 20


def _print_trace(result: dict) -> None:
    """The three checkpoints side by side, best first (the first TRACE_ROWS of each)."""
    stages = ("candidates", "reranked", "final")
    cell = lambda items, i: f"{items[i]['id']:<10} {items[i]['score']:.3f}" if i < len(items) else ""  # noqa: E731
    print(f"{'rank':>4} | " + " | ".join(f"{s} ({len(result[s])})".ljust(17) for s in stages))
    print("-----+-" + "-+-".join("-" * 17 for _ in stages))
    for i in range(min(TRACE_ROWS, max(len(result[s]) for s in stages))):
        print(f"{i + 1:>4} | " + " | ".join(cell(result[s], i).ljust(17) for s in stages))
    for gold_id, stage in (result.get("gold") or {}).items():
        print(f"gold {gold_id}: {stage}")
    print(f"route {result['route']}; searches:")
    for search in result["searches"]:
        print(f"  {search['kind']:<10} \"{search['query']}\": found {', '.join(search['found'][:5]) or 'nothing'}"
              + (f"; selected {', '.join(search['selected'])}" if search["selected"] else ""))


def _print_experiments(result: dict) -> None:
    from narrative_mirror.evaluation import markdown_table

    keep = ("experiment_id", "time", "kind", "changed", "train/recall@10", "train/answer_f1", "test/recall@10",
            "test/answer_f1")
    print(markdown_table([{k: row.get(k) for k in keep} for row in result["latest"]]))
    print(f"{result['experiments']} experiments in {result['log']}" + (f"; exported to {result['csv']}" if result["csv"] else ""))


def _print_human(command: str, result: dict) -> None:
    special = {"ask": _print_answer, "arc": _print_phases, "trace": _print_trace, "eval": _print_eval,
               "experiments": _print_experiments, "protocol": _print_protocol,
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
        p.add_argument("--verbose", action="store_true", help="Dagster's log and tracebacks on stderr")

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
    p.add_argument("--tokens", type=Path, default=None,
                   help="API token file (`token add`); required to serve beyond loopback")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("maintain", help="compact the LanceDB tables, update their full-text indexes, drop old versions")
    data_args(p)
    p.set_defaults(func=cmd_maintain)

    p = sub.add_parser("token", help="add or remove an API token of `serve --tokens FILE` (scoped to chats)")
    p.add_argument("action", choices=["add", "remove"])
    p.add_argument("--tokens", type=Path, required=True, help="the token file (created if missing)")
    p.add_argument("--name", required=True, help="who or what the token is for")
    p.add_argument("--chat", action="append", default=[], help="chat key or glob the token may read (repeatable)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_token)

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

    p = sub.add_parser("protocol", help="seed 002's protocol: train questions under fast/balanced/deep, adoption gate")
    data_args(p)
    p.set_defaults(func=cmd_protocol)

    p = sub.add_parser("demo", help="the main job: build and evaluate the packaged demo chats offline")
    data_args(p)
    p.set_defaults(func=cmd_demo)
    return parser


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    verbose = getattr(args, "verbose", False)
    stopped = False
    try:
        result = args.func(args)
    except (FileNotFoundError, ValueError) as exc:  # bad input: an argument, a file, a config value
        if verbose:
            raise
        result = {"problems": [_one_line(exc)]}
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the runner marked its run canceled
        result = {"failures": ["stopped by a signal before the command finished"]}
        stopped = True
    except Exception as exc:
        if verbose:
            raise
        result = {"failures": [f"{type(exc).__name__}: {_one_line(exc)} (--verbose shows the traceback)"]}
    problems, failures = result.setdefault("problems", []), result.setdefault("failures", [])
    for line in result.get("warnings", []):
        print(f"narrative-mirror {args.command}: warning: {line}", file=sys.stderr)
    for line in problems + failures:
        print(f"narrative-mirror {args.command}: {line}", file=sys.stderr)
    if args.json:
        print(json.dumps(result, default=str))
    elif set(result) - {"problems", "failures", "warnings"}:
        _print_human(args.command, result)
    if stopped:
        return 130
    return 1 if failures else 2 if problems else 0


def run() -> None:
    """The console script: ``main``, then exit without tearing the interpreter down.

    Everything is written and closed by then (stores, event log, Dagster instance); unwinding
    torch, LanceDB and Dagster module state would add about a second to every command.
    """
    import os

    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
