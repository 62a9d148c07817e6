"""A forget killed (-9) between two of its steps is finished by the next start of the memory: any
CLI command, or a serving app's start. The home holds the text in every kind of store a forget
reaches (log, index, retrieval events, a recall-run file, an export, a compute log, a SQLite
database); after the restart none holds it and the journal is gone."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from api.app import create_app
from api.live import mount_live
from cli.main import main
from narrative_mirror.events.record import RetrievalEvent
from narrative_mirror.events.writer import EventLog
from narrative_mirror.index_store import IndexStore
from narrative_mirror.live.memory import LiveMemory
from narrative_mirror.recall_runs import write_run
from narrative_mirror.retrieval.engine import Retriever

REPO = Path(__file__).resolve().parents[2]
CHAT = "diary_Ada"
SENTINEL = "My bike lock combination is 4471 and the qvzheron sticker marks it."
UNIQUE = b"qvzheron"
KILL_AFTER = """
import os, signal, sys
from pathlib import Path
from narrative_mirror.index_store import IndexStore
from narrative_mirror.live import forget
from narrative_mirror.live.log import LiveLog

home, stop = Path(sys.argv[1]), sys.argv[2]
forget.after_step = lambda step: os.kill(os.getpid(), signal.SIGKILL) if step == stop else None
forgetting = forget.Forgetting(LiveLog(home / "live"), IndexStore(str(home / "lancedb")), home)
forgetting.forget("diary_Ada", forget.Selection(ids=("d2",)))
"""


def holders(home: Path) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file() and UNIQUE in p.read_bytes().lower())


def home_with_the_sentinel(home: Path, embedder) -> IndexStore:
    store = IndexStore(str(home / "lancedb"))
    LiveMemory(home / "live", store, embedder).add(
        CHAT,
        [
            {"id": "d1", "author": "Ada", "text": "Lunch with Bo at the harbour.", "timestamp": "2025-04-01T12:00:00Z"},
            {"id": "d2", "author": "Ada", "text": SENTINEL, "timestamp": "2025-04-01T13:00:00Z"},
            {"id": "d3", "author": "Ada", "text": "Swimming at six.", "timestamp": "2025-04-01T14:00:00Z"},
        ],
    )
    events = EventLog(store.uri, spool_dir=home / "events" / "spool")
    events.log(RetrievalEvent("local/ada", CHAT, f"what did I say about {SENTINEL}", ["d2"], "hybrid"))
    events.close()
    write_run(SENTINEL, {"chat": CHAT}, [{"id": "d2", "text": SENTINEL}], [], root=home / "recall_runs")
    (home / "exports").mkdir()
    (home / "exports" / "retrieval_training_examples.jsonl").write_text(json.dumps({"query": SENTINEL}) + "\n")
    logs = home / "dagster" / "storage" / "run1" / "compute_logs"
    logs.mkdir(parents=True)
    (logs / "step.err").write_text(f"INFO preview: {SENTINEL}\n")
    with sqlite3.connect(home / "dagster" / "runs.db") as db:
        db.execute("CREATE TABLE event_logs (id INTEGER PRIMARY KEY, event TEXT)")
        db.execute("INSERT INTO event_logs (event) VALUES (?)", (json.dumps({"md": f"| {SENTINEL} |"}),))
    db.close()
    return store


@pytest.mark.parametrize("stop, restart", [("index", "cli"), ("recall_runs", "serve")])
def test_a_forget_killed_between_steps_is_finished_by_the_next_start(stop, restart, embedder, tmp_path):
    home = Path(os.environ["NM_HOME"])
    store = home_with_the_sentinel(home, embedder)
    assert len(holders(home)) >= 7
    killed = subprocess.run(
        [sys.executable, "-c", KILL_AFTER, str(home), stop],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        timeout=120,
    )
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    journals = list((home / "live" / "forgetting").glob("*.json"))
    assert len(journals) == 1
    done = json.loads(journals[0].read_text())["done"]
    assert done[-1] == stop and "compaction" not in done
    assert b"qvzheron" not in (home / "live" / f"{CHAT}.jsonl").read_bytes()  # the log went first
    assert "dagster/runs.db" in holders(home)  # later steps had not run

    if restart == "cli":  # any command finishes it before it answers
        assert main(["token", "add", "--tokens", str(tmp_path / "t.json"), "--name", "x", "--chat", "*", "--json"]) == 0
    else:  # a serving app finishes it before it takes requests
        retriever = Retriever(store, embedder)
        app = create_app(
            retriever, EventLog(store.uri, spool_dir=home / "events" / "spool"), runs_root=home / "recall_runs"
        )
        mount_live(app, app.state.api, LiveMemory(home / "live", store, embedder, on_indexed=retriever.invalidate))
        with TestClient(app, base_url="http://localhost") as client:
            hits = client.get("/api/memory/search", params={"chat": CHAT, "q": "bike lock combination", "k": 3})
            assert hits.status_code == 200 and [h["id"] for h in hits.json()["hits"]] == ["d1", "d3"]
    assert holders(home) == []
    assert not list((home / "live" / "forgetting").glob("*.json"))
    assert [r["local_id"] for r in store.messages_for(CHAT).to_dicts()] == ["d1", "d3"]
    run = json.loads(sorted((home / "recall_runs").rglob("run_*.json"))[0].read_text())  # the one made before
    assert (run["query"], run["pre_items"][0]["text"]) == ("[forgotten]", "[forgotten]")
    with sqlite3.connect(home / "dagster" / "runs.db") as db:
        assert db.execute("SELECT event FROM event_logs").fetchall() == [('{"md": "| [forgotten] |"}',)]
    db.close()
