"""Commands that build and measure the memory: ingest, build, eval, protocol, demo."""

from __future__ import annotations

from cli.session import EVAL, INGEST, build_memory, not_built, outcome, partition_rows, runner_for


def cmd_ingest(args) -> dict:
    with runner_for(args) as runner:
        keys = runner.register()
        report = runner.materialize(INGEST, keys, what="ingest")
        msgs = qa = arcs = unresolved = 0
        per_file = {}
        for key in (k for k in keys if k not in report.failed):
            m, q, a = (runner.read(name, key) for name in ("messages", "gold_qa", "arc_cases"))
            n_unresolved = int(q["unresolved"].list.len().sum() or 0)
            per_file[key] = {
                "messages": m.height,
                "qa": q.height,
                "arc_cases": a.height,
                "unresolved_evidence": n_unresolved,
                "ran": report.ran.get(key, []),
            }
            msgs, qa, arcs = msgs + m.height, qa + q.height, arcs + a.height
            unresolved += n_unresolved
    return {
        "data": str(runner.data_dir),
        **built_counts(keys, report),
        "messages": msgs,
        "qa": qa,
        "arc_cases": arcs,
        "unresolved_evidence": unresolved,
        "per_file": per_file,
        **outcome(runner, report),
    }


def cmd_build(args) -> dict:
    with runner_for(args) as runner:
        keys, report = build_memory(runner, full_check=getattr(args, "repair", False))
        counts = {"messages": 0, "blocks": 0, "threads": 0, "messages_in_blocks": 0}
        built = [k for k in keys if k not in report.failed]
        per_file = partition_rows(report, built)
        for key in built:
            msgs, blocks, threads = (runner.read(a, key) for a in ("messages", "l1_topics", "l2_threads"))
            ids = [i for row in blocks["message_ids"].to_list() for i in row]
            # "in exactly one block": ids listed once, and every message listed.
            exactly_once = len(set(ids) & set(msgs["local_id"].to_list())) if len(ids) == len(set(ids)) else 0
            row = {
                "messages": msgs.height,
                "blocks": blocks.height,
                "threads": threads.height,
                "messages_in_blocks": exactly_once,
            }
            per_file[key].update(row)
            for name, value in row.items():
                counts[name] += value
    return {
        "data": str(runner.data_dir),
        **built_counts(keys, report),
        **counts,
        "encoded_messages": sum(report.encoded_messages.values()),
        "seconds": {k: round(v, 3) for k, v in report.seconds.items()},
        "per_file": per_file,
        "repairs": report.repairs,
        **outcome(runner, report),
    }


def built_counts(keys: list[str], report) -> dict:
    """How many chat files there are, how many were built, and which were not and why."""
    failed = not_built(report, keys)
    return {"chat_files": len(keys), "built": len(keys) - len(failed), "not_built": failed}


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


def cmd_eval(args) -> dict:
    from assets.evaluation.assets import TEST_TAG, eval_fingerprint
    from assets.evaluation.run_config import eval_run_config, evaluated_under_another_profile

    profile = args.profile or ""
    with runner_for(args) as runner:
        keys = runner.register()
        chosen = _split_keys(keys, args.split, args.allow_test)
        _, memory = build_memory(runner, [k for ks in chosen.values() for k in ks])
        chosen = {which: [k for k in ks if k not in memory.failed] for which, ks in chosen.items()}
        fingerprint = eval_fingerprint(
            runner.resource("embedder").get(),
            runner.resource("llm").get(),
            runner.resource("evaluation").config(profile),
        )["fingerprint"]
        config = eval_run_config(profile, [*EVAL, "eval_summary"])
        reports = [memory]
        for which, split_keys in chosen.items():
            # Evaluated with another profile (the run config Dagster recorded): run again.
            other = evaluated_under_another_profile(runner.instance, EVAL, split_keys, profile)
            if other:
                reports.append(
                    runner.materialize(
                        EVAL, other, tags={TEST_TAG: which}, force=True, what="evaluation", run_config=config
                    )
                )
            reports.append(
                runner.materialize(EVAL, split_keys, tags={TEST_TAG: which}, what="evaluation", run_config=config)
            )
        reports.append(runner.materialize(["eval_summary"], None, force=True, what="summary", run_config=config))
        evaluated = {which: [k for k in ks if not any(k in r.failed for r in reports)] for which, ks in chosen.items()}
        targets = [k for ks in evaluated.values() for k in ks]
        result = {
            "split": args.split,
            **_split_metrics(runner, targets),
            "fingerprint": fingerprint,
            **outcome(runner, *reports),
        }
        _report_standing(runner, [k for ks in chosen.values() for k in ks], reports, result)
        if args.split == "all":
            result["per_split"] = {which: _split_metrics(runner, ks) for which, ks in evaluated.items() if ks}
    return result


def _report_standing(runner, keys: list[str], reports, result: dict) -> None:
    """Regressions that stand from an earlier evaluation of ``keys`` (this command ran nothing
    new for them): an ERROR one fails the command as the run that found it did, a WARN one warns."""
    from narrative_mirror import regressions

    failed_now = {k for r in reports for k in r.failures}
    standing = [e for e in regressions.read(runner.state.root).values() if e["partition"] in keys]
    result["standing_regressions"] = standing
    for entry in standing:
        if entry["partition"] not in failed_now:
            (result["failures"] if regressions.is_error(entry) else result["warnings"]).append(
                regressions.describe(entry)
            )


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


def cmd_protocol(args) -> dict:
    """The agentic-RAG design's three-profile protocol over the TRAIN chat files, with its adoption gate."""
    from narrative_mirror import split as split_lib

    with runner_for(args) as runner:
        keys = runner.register()
        train = split_lib.keys_in(split_lib.TRAIN, keys)
        _, memory = build_memory(runner, train)
        report = runner.materialize(["profile_protocol"], None, force=True, what="protocol")
        table = runner.read("profile_protocol", None).to_dicts()
        gate = runner.last_check("profile_protocol", "adoption_gate")
    return {
        "train_chat_files": [k for k in train if k not in memory.failed],
        "profiles": table,
        "adoption_gate": gate,
        **outcome(runner, memory, report),
    }


def cmd_demo(args) -> dict:
    """The main job on the packaged demo data: build, evaluate train and test, summarize."""
    args.split, args.allow_test, args.profile = "all", True, None
    return cmd_eval(args)
