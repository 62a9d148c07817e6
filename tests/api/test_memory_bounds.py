"""What a serving process keeps per search stays bounded (real app, LanceDB, embedder, event log
with follow-up linking): distinct searches leave at most ``keep_last`` recall-run files, the
event table's handle is opened anew (a LanceDB handle keeps what it read of every version it
wrote), the follow-up linker keeps a bounded set of users and vectors, and no client's limiter
state outlives its requests."""

from __future__ import annotations

import pytest
from event_factory import event
from memory_api_chat import CHAT, build_retriever
from starlette.testclient import TestClient

from api.app import create_app
from narrative_mirror.events.writer import REOPEN_AFTER_WRITES, EventLog

SEARCHES = 60
WORDS = "rye bread bakery marathon job sunday loaf run legs morning training week forty elm street luck".split()


@pytest.mark.slow  # 60 searches, each event stored before the next: ~30 s, minutes on a loaded machine
def test_distinct_searches_leave_bounded_files_handles_and_caches(tmp_path, embedder, monkeypatch):
    config = tmp_path / "config"
    config.mkdir()
    (config / "retention.toml").write_text("[recall_runs]\nkeep_last = 10\n")
    monkeypatch.setenv("NM_CONFIG_DIR", str(config))
    retriever = build_retriever(tmp_path / "lancedb", embedder)
    event_log = EventLog(tmp_path / "events", embedder=embedder)
    app = create_app(retriever, event_log, runs_root=tmp_path / "runs")
    with TestClient(app, base_url="http://localhost") as client:
        for n in range(SEARCHES):
            query = f"{WORDS[n % len(WORDS)]} {WORDS[(n * 7) % len(WORDS)]} visit {n}"
            response = client.get("/api/memory/search", params={"q": query, "chat": CHAT, "k": 3, "user_id": f"u{n}"})
            assert response.status_code == 200
            assert event_log.flush()  # stored before the next search: one table write per search
        api = app.state.api
        assert api.search_limiter.load("address testclient") == (0, 0) and not api.search_limiter._clients
    runs = list((tmp_path / "runs").rglob("run_*.json"))
    assert 10 <= len(runs) <= 11, len(runs)  # not one file per search
    assert event_log._writes == SEARCHES % REOPEN_AFTER_WRITES  # the handle was opened anew on the way
    linker = event_log._follow_ups
    assert len(linker._vectors) <= linker.max_cached_vectors and len(linker._recent) <= linker.max_users == 1000
    assert event_log.events().height == SEARCHES


def test_the_event_tables_handle_is_opened_anew_after_its_writes(tmp_path):
    event_log = EventLog(tmp_path / "events")
    opened = []
    open_for_write = event_log._open_for_write

    def counting():
        table = open_for_write()
        if not opened or opened[-1] is not table:
            opened.append(table)
        return table

    event_log._open_for_write = counting
    for n in range(2 * REOPEN_AFTER_WRITES + 5):
        event_log.log(event(f"query {n}"))
        assert event_log.flush()  # one write each
    assert len(opened) == 3 and event_log._writes == 5
    assert event_log.events().height == 2 * REOPEN_AFTER_WRITES + 5
    event_log.close()
