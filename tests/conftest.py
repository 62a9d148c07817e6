"""Shared fixtures. Test helpers in this folder (e.g. llm_servers.py) import by module name."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REALTALK_DIR = TESTS_DIR.parent.parent / "shared" / "datasets" / "realtalk"
if not REALTALK_DIR.is_dir():
    REALTALK_DIR = Path("/work/shared/datasets/realtalk")
REALTALK_ARCS_DIR = REALTALK_DIR.parent / "realtalk_arcs"


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):
    """Every test gets its own NM_HOME and no LLM unless it configures one."""
    monkeypatch.setenv("NM_HOME", str(tmp_path / "nm_home"))
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "NM_LLM_MODEL", "NM_LLM_TIMEOUT", "NM_DATA_DIR",
                "NM_ARCS_DIR", "NM_CONFIG_DIR", "NM_EVAL_PROFILE", "SLACK_BOT_TOKEN"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="session")
def realtalk_dir() -> Path:
    if not REALTALK_DIR.is_dir():
        pytest.skip(f"RealTalk data not found at {REALTALK_DIR}")
    return REALTALK_DIR


@pytest.fixture(scope="session")
def embedder():
    from narrative_mirror.embedding import Embedder

    return Embedder()
