"""``narrative-mirror baseline show|pin``: the baseline each evaluation's regression check
compares with (assets/evaluation/baseline.py), and moving it on purpose: ``pin`` accepts the
latest evaluation of each chat file (or of ``--chat``) as its baseline, passed or not."""

from __future__ import annotations

from cli.session import runner_for

EVALUATIONS = ("qa_eval", "arc_eval")
SHOWN = {"qa_eval": "recall@10", "arc_eval": "arc_global_recall"}


def cmd_baseline(args) -> dict:
    from assets.evaluation.baseline import find_baseline, pin_latest
    from assets.partitions import chat_files
    from narrative_mirror import baselines, regressions

    with runner_for(args) as runner:
        known = runner.instance.get_dynamic_partitions(chat_files.name)
        unknown = sorted(set(args.chat) - set(known))
        if unknown:
            raise ValueError(
                f"--chat {unknown[0]!r}: no such chat file in the Dagster instance (known: {', '.join(known)})"
            )
        pins = baselines.pins_path(runner.state.root)
        per_file, pinned = {}, []
        for asset in [args.asset] if args.asset else EVALUATIONS:
            for key in sorted(args.chat or known):
                if args.action == "pin" and pin_latest(runner.instance, asset, key, pins) is not None:
                    pinned.append(f"{asset}/{key}")
                    regressions.accept(runner.state.root, asset, key)
                baseline = find_baseline(runner.instance, asset, key, pins)
                if baseline is not None:
                    per_file[f"{asset}/{key}"] = {
                        "baseline": baseline.describe(),
                        SHOWN[asset]: round(baseline.metrics.get(SHOWN[asset], 0.0), 3),
                    }
    return {"action": args.action, "pinned": pinned, "pins_file": str(pins), "per_file": per_file}
