"""Loading the embedder prints nothing: no "Loading weights" progress bar on every command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.e2e
def test_loading_the_embedder_prints_no_progress_bar():
    code = "from narrative_mirror.embedding import Embedder; print(Embedder().dimension)"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "384\n"
    assert "Loading weights" not in proc.stderr and "%|" not in proc.stderr, proc.stderr
