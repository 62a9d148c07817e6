""".ci/run lints, then runs every tier, services included, in one test session, and fails when the linter or a test
fails (the real script, with the set-up, the linter and scripts/test.sh replaced by stubs that log their calls)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_ci(tmp_path: Path, failing: str, ruff: bool = True) -> tuple[int, str, list[str]]:
    """Run .ci/run in a copy whose scripts/test.sh exits 1 for the calls whose arguments contain
    ``failing`` ("" fails none) and whose ruff passes (``ruff=False``: the caller wrote its own);
    returns (exit code, output, the test.sh calls in order)."""
    (tmp_path / ".ci").mkdir()
    shutil.copy(REPO / ".ci" / "run", tmp_path / ".ci" / "run")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "setup.sh").write_text("exit 0\n")
    calls = tmp_path / "calls"
    (tmp_path / "scripts" / "test.sh").write_text(
        f'echo "$*" >> {calls}\necho "ran: $*"\n[ -n "{failing}" ] && [[ "$*" == *"{failing}"* ]] && exit 1\nexit 0\n'
    )
    if ruff:
        (tmp_path / ".venv" / "bin").mkdir(parents=True)
        (tmp_path / ".venv" / "bin" / "ruff").write_text("#!/bin/sh\nexit 0\n")
        (tmp_path / ".venv" / "bin" / "ruff").chmod(0o755)
    done = subprocess.run(["bash", str(tmp_path / ".ci" / "run")], capture_output=True, text=True, timeout=60)
    return (done.returncode, done.stdout + done.stderr, calls.read_text().splitlines() if calls.exists() else [])


def test_ci_runs_every_tier_in_one_test_command_and_passes_when_it_passes(tmp_path):
    code, out, calls = run_ci(tmp_path, failing="")
    assert code == 0, out
    assert calls == ["-q -ra -n 3 --dist worksteal --all-tiers --durations=30"]
    assert "ran: -q -ra -n 3" in out


def test_ci_fails_when_the_tests_fail(tmp_path):
    code, out, calls = run_ci(tmp_path, failing="--all-tiers")
    assert code != 0 and len(calls) == 1, out


def test_ci_fails_when_the_linter_fails_before_any_test(tmp_path):
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "ruff").write_text("#!/bin/sh\necho 'E999 lint'\nexit 1\n")
    (tmp_path / ".venv" / "bin" / "ruff").chmod(0o755)
    code, out, calls = run_ci(tmp_path, failing="", ruff=False)
    assert code != 0 and calls == [] and "E999 lint" in out, out
