""".ci/run runs every tier, the local ones in one session and then the services tier, and fails when any tier fails
(the real script, with the set-up, the linter and scripts/test.sh replaced by stubs that log their calls)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run_ci(tmp_path: Path, failing: str) -> tuple[int, str, list[str]]:
    """Run .ci/run in a copy whose scripts/test.sh exits 1 for the calls whose arguments contain
    ``failing`` ("" fails none); returns (exit code, output, the test.sh calls in order)."""
    (tmp_path / ".ci").mkdir()
    shutil.copy(REPO / ".ci" / "run", tmp_path / ".ci" / "run")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "setup.sh").write_text("exit 0\n")
    calls = tmp_path / "calls"
    (tmp_path / "scripts" / "test.sh").write_text(
        f'echo "$*" >> {calls}\necho "ran: $*"\n[ -n "{failing}" ] && [[ "$*" == *"{failing}"* ]] && exit 1\nexit 0\n'
    )
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "ruff").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / ".venv" / "bin" / "ruff").chmod(0o755)
    done = subprocess.run(["bash", str(tmp_path / ".ci" / "run")], capture_output=True, text=True, timeout=60)
    return (done.returncode, done.stdout + done.stderr, calls.read_text().splitlines())


def test_ci_runs_every_tier_in_two_test_commands_and_passes_when_they_pass(tmp_path):
    code, out, calls = run_ci(tmp_path, failing="")
    assert code == 0, out
    assert calls == ["-q -ra -n 3 --dist worksteal --all-tiers -m not services --durations=30", "-q -ra -m services"]
    assert "ci: local tiers exit 0, services tier exit 0" in out


@pytest.mark.parametrize("failing", ["-m services", "--all-tiers"])
def test_ci_fails_when_either_tier_fails(tmp_path, failing):
    code, out, calls = run_ci(tmp_path, failing=failing)
    assert code != 0 and len(calls) == 2, out  # the other tier still runs, so both report
