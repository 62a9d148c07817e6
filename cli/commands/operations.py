"""Operations commands: index upkeep, the experiment log, the test backfill, recall-run comparison."""

from __future__ import annotations

import sys
from pathlib import Path

from cli.session import runner_for
from narrative_mirror.home import Home


def cmd_maintain(args) -> dict:
    """LanceDB upkeep and retention now (what `index_maintenance_job` and `maintain_job` do nightly
    under the daemon): ``pruned`` says what retention.toml's keep_days removed."""
    from narrative_mirror.maintenance import prune
    from narrative_mirror.retention import load_retention

    retention = load_retention()  # a bad setting fails before anything is changed
    with runner_for(args) as runner:  # under the home lock: no build writes meanwhile
        store = runner.resource("lancedb")
        pruned = prune(
            Home(runner.state.root).recall_runs,
            store.resolved_uri(),
            retention,
            storage_options=store.storage_options(),
        )
        report = store.get().maintain()
    return {"lancedb": store.resolved_uri(), **report, "pruned": pruned}


def cmd_experiments(args) -> dict:
    from narrative_mirror import experiments
    from resources import runtime

    log = runtime.home().experiments
    if args.csv:
        experiments.export_csv(args.csv, log)
    rows = experiments.flat_rows(experiments.read(log))
    return {"experiments": len(rows), "log": str(log), "csv": str(args.csv) if args.csv else None, "latest": rows[-20:]}


def cmd_backfill_test(args) -> dict:
    """Launch the test evaluation as a Dagster backfill over exactly the test chat files."""
    import subprocess

    from instance.lifecycle import dagster_home
    from narrative_mirror import split as split_lib
    from resources import environment

    with runner_for(args) as runner:
        keys = split_lib.keys_in("test", runner.register())
    if not keys:
        raise ValueError(f"no test chat files in {runner.data_dir}")
    command = [
        str(Path(sys.executable).parent / "dagster"),
        "job",
        "backfill",
        "-m",
        "definitions",
        "-j",
        "test_eval_job",
        "--partitions",
        ",".join(keys),
        "--noprompt",
    ]
    if not args.launch:
        return {"test_partitions": keys, "command": " ".join(command), "launched": False}
    env = environment.child_env(NM_DATA_DIR=str(runner.data_dir), DAGSTER_HOME=str(dagster_home()))
    proc = subprocess.run(command, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ValueError(f"dagster job backfill failed: {proc.stderr.strip()[-2000:]}")
    return {
        "test_partitions": keys,
        "command": " ".join(command),
        "launched": True,
        "note": "the backfill daemon (dg dev / dagster-daemon) runs it; see the UI's Backfills tab",
    }


def cmd_compare_run(args) -> dict:
    from narrative_mirror.recall_runs import compare_run

    return {"run": str(args.run_file), **compare_run(args.run_file)}
