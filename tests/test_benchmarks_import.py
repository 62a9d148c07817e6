"""Every benchmark script imports: its modules, and what they import in turn, resolve as the script
runs them (``python benchmarks/NAME.py``: the benchmarks folder first on the path). A benchmark is
run by hand, weeks apart; a moved helper breaks it silently otherwise."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

IMPORT_EACH = """
import importlib.util, sys, traceback
failed = []
initial_path = list(sys.path)
for path in sys.argv[1:]:
    sys.path[:] = initial_path  # what one script adds is not there for the next
    name = path.rsplit("/", 1)[1][:-3]
    spec = importlib.util.spec_from_file_location(name, path)
    module = sys.modules[name] = importlib.util.module_from_spec(spec)  # as run: its dataclasses find it
    try:
        spec.loader.exec_module(module)
    except Exception:
        failed.append(path + ": " + traceback.format_exc().strip().splitlines()[-1])
print("\\n".join(failed))
"""


@pytest.mark.slow
def test_every_benchmark_script_imports():
    scripts = sorted(str(p) for p in BENCHMARKS.glob("*.py"))
    assert len(scripts) > 20
    proc = subprocess.run(
        [sys.executable, "-c", IMPORT_EACH, *scripts],
        cwd=BENCHMARKS,
        env={"PYTHONPATH": str(BENCHMARKS), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "", proc.stdout
