"""What a person waits for on the command line, an earlier commit beside this tree in one run:
`ask` on a built demo home and a `build` with nothing to do, alternating old and new, first on a
quiet machine, then with ``--load`` busy processes beside them; medians and old/new ratios.

    .venv/bin/python benchmarks/cli_waits.py --baseline 7ccf972 [--repeats 3] [--load 2]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import commit_tree

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from resources import environment  # noqa: E402

QUESTION = ("ask", "--chat", "demo_harbor_Lena_Sam", "where do they sail?")


def timed(tree: Path, home: str, *args: str) -> float:
    """Seconds one command of ``tree``'s command line takes on ``home``."""
    env = environment.child_env(PYTHONPATH=str(tree), NM_HOME=home, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=tree, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: {' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return time.monotonic() - started


def _spin() -> None:
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="the earlier commit measured beside this tree")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--load", type=int, default=2, help="busy processes in the loaded half")
    args = parser.parse_args()
    trees = {"old": commit_tree(args.baseline, ()), "new": REPO}
    homes = {name: tempfile.mkdtemp(prefix=f"nm_waits_{name}_") for name in trees}
    for name, tree in trees.items():  # built, then once more so nothing is left to do
        timed(tree, homes[name], "build")
        timed(tree, homes[name], "build")
    runs: dict[tuple[str, str, str], list[float]] = {}
    for condition, busy in (("quiet", 0), ("loaded", args.load)):
        spinners = [multiprocessing.get_context("spawn").Process(target=_spin, daemon=True) for _ in range(busy)]
        for spinner in spinners:
            spinner.start()
        try:
            for _ in range(args.repeats):
                for name, tree in trees.items():
                    runs.setdefault((condition, name, "ask"), []).append(timed(tree, homes[name], *QUESTION))
                    runs.setdefault((condition, name, "build, nothing to do"), []).append(
                        timed(tree, homes[name], "build")
                    )
        finally:
            for spinner in spinners:
                spinner.terminate()
    for condition in ("quiet", "loaded"):
        for what in ("ask", "build, nothing to do"):
            old = statistics.median(runs[(condition, "old", what)])
            new = statistics.median(runs[(condition, "new", what)])
            print(f"{condition:6s} {what:21s} {args.baseline} {old:6.2f} s  this tree {new:6.2f} s  {old / new:.2f}x")


if __name__ == "__main__":
    main()
