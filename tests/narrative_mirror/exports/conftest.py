"""Makes the test helper ``writers`` importable by module name; paths to the shared fixtures."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

REPO = HERE.parents[2]
CHAT_MINER_DIR = REPO / ".." / "shared" / "datasets" / "exports" / "chat-miner"
if not CHAT_MINER_DIR.is_dir():
    CHAT_MINER_DIR = Path("/work/shared/datasets/exports/chat-miner")


@pytest.fixture(scope="session")
def chat_miner_dir() -> Path:
    if not CHAT_MINER_DIR.is_dir():
        pytest.skip(f"chat-miner fixtures not found at {CHAT_MINER_DIR}")
    return CHAT_MINER_DIR
