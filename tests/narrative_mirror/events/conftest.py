"""Event logs of the retrieval-event tests: plain, and with follow-up detection (real embedder)."""

from __future__ import annotations

import pytest

from narrative_mirror.events.writer import EventLog


@pytest.fixture
def events_log(tmp_path):
    log = EventLog(tmp_path / "lancedb")
    yield log
    log.close()


@pytest.fixture
def follow_log(tmp_path, embedder):
    embedder.encode(["warm up"])  # a cold model load on a busy machine can outlast flush()'s wait
    log = EventLog(tmp_path / "lancedb", embedder=embedder)
    yield log
    log.close()
