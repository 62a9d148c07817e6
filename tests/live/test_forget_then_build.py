"""After any forget (one message, an author, a time range, the whole chat, or a forget killed
half way) the next build exits 0, a build after it has nothing left to run, and the home serves
every chat: a live chat and a chat-file chat (a demo chat) are built once, through Dagster, and
each test forgets in a copy of that home. One message whose text no block summary quotes is the
case that used to fail (the blocks still listed it: "members without a message vector"). And a
forget leaves no word of the message in any file of the home: Dagster's SQLite stores, its logs,
and the fields of a retrieval event that a client chose (its session id)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import lancedb
import polars as pl
import pytest
from starlette.testclient import TestClient

from api.app import create_app
from api.live import mount_live
from cli.main import main
from narrative_mirror import settings
from narrative_mirror.events.record import RetrievalEvent
from narrative_mirror.events.writer import EventLog
from narrative_mirror.index_store import IndexStore
from narrative_mirror.live.memory import LiveMemory
from narrative_mirror.retrieval.engine import Retriever

REPO = Path(__file__).resolve().parents[2]
CHAT = "notes_Ada_Bo"
FILE_CHAT = "demo_garden_Mara_Theo"
MESSAGES = [
    ("m1", "Ada", "Morning Bo, did you feed the cat before leaving?"),
    ("m2", "Bo", "Yes, and I watered the basil on the balcony too."),
    ("m3", "Ada", "Good. Remember the gym bag for tonight."),
    ("m4", "Ada", "The brass key for locker seven is taped under the qvzplover bench."),
    ("m5", "Bo", "Got it, thanks."),  # short: no block summary or keyword quotes it
    ("m6", "Ada", "Dinner at the Thai place tonight at seven?"),
    ("m7", "Bo", "Sounds great, I will book a table for two."),
]
KILL_AFTER = """
import os, signal, sys
from pathlib import Path
from narrative_mirror.index_store import IndexStore
from narrative_mirror.live import forget
from narrative_mirror.live.log import LiveLog

home = Path(sys.argv[1])
forget.after_step = lambda step: os.kill(os.getpid(), signal.SIGKILL) if step == "index" else None
forget.Forgetting(LiveLog(home / "live"), IndexStore(str(home / "lancedb")), home).forget(
    "notes_Ada_Bo", forget.Selection(ids=("m5",)))
"""


def use_embedder(monkeypatch, embedder) -> None:
    from resources import dagster_resources, runtime

    monkeypatch.setattr(runtime, "embedder", lambda *args, **kwargs: embedder)
    monkeypatch.setattr(dagster_resources, "build_embedder", lambda *args, **kwargs: embedder)


def build(data: Path, capsys) -> dict:
    capsys.readouterr()
    code = main(["build", "--data", str(data), "--json"])
    report = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert code == 0, report
    return report


@pytest.fixture(scope="module")
def built_home(tmp_path_factory, embedder) -> tuple[Path, Path]:
    """(data folder with one demo chat, a home holding it and the live chat, both built)."""
    root = tmp_path_factory.mktemp("forget_build")
    data, home = root / "data", root / "home"
    data.mkdir()
    shutil.copy(settings.DEMO_DATA_DIR / f"{FILE_CHAT}.json", data)
    batch = root / "batch.jsonl"
    batch.write_text(
        "".join(
            json.dumps({"id": i, "author": a, "text": t, "timestamp": f"2025-03-01T08:0{n}:00Z"}) + "\n"
            for n, (i, a, t) in enumerate(MESSAGES)
        )
    )
    with pytest.MonkeyPatch.context() as patch:
        use_embedder(patch, embedder)
        patch.setenv("NM_HOME", str(home))
        assert main(["add", "--chat", CHAT, "--file", str(batch), "--json"]) == 0
        assert main(["build", "--data", str(data), "--json"]) == 0
    return data, home


@pytest.fixture
def home(built_home, embedder, monkeypatch) -> Path:
    """A copy of the built home as this test's NM_HOME."""
    use_embedder(monkeypatch, embedder)
    home = Path(os.environ["NM_HOME"])
    shutil.copytree(built_home[1], home, dirs_exist_ok=True)
    return home


def serving(home: Path, embedder) -> dict:
    """Health and a search per chat of an app over ``home`` (as a restarted ``serve`` would be)."""
    store = IndexStore(str(home / "lancedb"))
    retriever = Retriever(store, embedder)
    app = create_app(
        retriever, EventLog(store.uri, spool_dir=home / "events" / "spool"), runs_root=home / "recall_runs"
    )
    mount_live(app, app.state.api, LiveMemory(home / "live", store, embedder, on_indexed=retriever.invalidate))
    with TestClient(app, base_url="http://localhost") as client:
        health = client.get("/api/health").json()
        searches = {
            chat: client.get("/api/memory/search", params={"chat": chat, "q": "dinner tonight", "k": 3})
            for chat in (CHAT, FILE_CHAT)
        }
    return {
        "health": health,
        "status": {c: r.status_code for c, r in searches.items()},
        "ids": {c: [h["id"] for h in r.json()["hits"]] for c, r in searches.items() if r.status_code == 200},
    }


def test_the_build_after_forgetting_one_message_succeeds_and_settles(built_home, home, embedder, capsys):
    assert main(["forget", "--chat", CHAT, "--id", "m5", "--json"]) == 0
    forgot = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert len(forgot["not_reached"]) == 2 and "outside NM_HOME" in forgot["not_reached"][0]  # said, per store
    report = build(built_home[0], capsys)
    assert report["per_file"][CHAT]["messages"] == 6 and report["per_file"][CHAT]["messages_in_blocks"] == 6
    assert report["per_file"][CHAT]["encoded_messages"] == 0  # the kept vectors were reused
    assert report["per_file"][FILE_CHAT]["ran"] == []
    again = build(built_home[0], capsys)  # what Dagster sees as stale after the forget was all rebuilt
    assert again["per_file"][CHAT]["ran"] == [] and again["repairs"] == []
    served = serving(home, embedder)
    assert served["health"]["status"] == "ok" and {CHAT, FILE_CHAT} <= set(served["health"]["chats"])
    assert served["status"] == {CHAT: 200, FILE_CHAT: 200} and served["ids"][CHAT][0] == "m6"
    blocks = IndexStore(str(home / "lancedb")).read_columns("blocks", ["chat_file", "block_id"])
    assert CHAT in blocks.column("chat_file").to_pylist()


@pytest.mark.slow
@pytest.mark.parametrize(
    "how, left",
    [
        (["--author", "Bo"], ["m1", "m3", "m4", "m6"]),
        (["--since", "2025-03-01T08:01:00Z", "--until", "2025-03-01T08:05:00Z"], ["m1", "m6", "m7"]),
        (["--all"], None),
    ],
)
def test_the_build_after_any_forget_succeeds(how, left, built_home, home, embedder, capsys):
    assert main(["forget", "--chat", CHAT, *how, "--json"]) == 0
    report = build(built_home[0], capsys)
    served = serving(home, embedder)
    assert served["health"]["status"] == "ok", served["health"]
    assert served["status"][FILE_CHAT] == 200
    if left is None:  # the whole chat: not a chat of the home any more
        assert CHAT not in report["per_file"] and CHAT not in served["health"]["chats"]
        assert served["status"][CHAT] == 404
    else:
        assert report["per_file"][CHAT]["messages"] == len(left) == report["per_file"][CHAT]["messages_in_blocks"]
        assert served["status"][CHAT] == 200 and set(served["ids"][CHAT]) <= set(left)


@pytest.mark.slow
def test_the_build_after_a_killed_forget_finishes_it_and_succeeds(built_home, home, embedder, capsys):
    killed = subprocess.run(
        [sys.executable, "-c", KILL_AFTER, str(home)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        timeout=120,
    )
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    assert list((home / "live" / "forgetting").glob("*.json"))  # left half done: layers untouched
    report = build(built_home[0], capsys)  # the command finishes the forget first
    assert not list((home / "live" / "forgetting").glob("*.json"))
    assert report["per_file"][CHAT]["messages"] == 6
    served = serving(home, embedder)
    assert served["health"]["status"] == "ok" and served["status"] == {CHAT: 200, FILE_CHAT: 200}


def holders(home: Path, word: bytes) -> list[str]:
    """Files under ``home`` (Dagster's SQLite files and logs included) holding ``word``, any case:
    raw bytes, UTF-16, and the rows of parquet files and LanceDB tables (compressed on disk)."""
    db = lancedb.connect(str(home / "lancedb"))
    found = [
        f"lancedb/{name} (rows)"
        for name in db.table_names()
        if word.decode() in str(db.open_table(name).to_arrow().to_pylist()).lower()
    ]
    for path in sorted(p for p in home.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if word in data.lower() or word.decode().encode("utf-16-le") in data.lower():
            found.append(str(path.relative_to(home)))
        elif data[:4] == b"PAR1" and word.decode() in str(pl.read_parquet(path).to_dicts()).lower():
            found.append(str(path.relative_to(home)) + " (rows)")
    return found


def test_forget_leaves_no_word_in_dagster_or_in_a_client_chosen_field(built_home, home, embedder):
    from cli.runner import Runner

    store = IndexStore(str(home / "lancedb"))
    events = EventLog(store.uri, spool_dir=home / "events" / "spool", embedder=embedder)
    for _ in range(2):  # the same question again: a follow-up, listed by the stats asset
        events.log(
            RetrievalEvent(
                "local/ada", CHAT, "where is the qvzplover bench?", ["m4", "m6"], "hybrid", session_id="qvzplover-hunt"
            )
        )
    events.close()
    with Runner(built_home[0], progress=lambda line: None) as runner:
        assert not runner.materialize(["retrieval_event_stats"], None, force=True).failed
    before = holders(home, b"qvzplover")
    assert "live/notes_Ada_Bo.jsonl" in before and "lancedb/retrieval_events (rows)" in before

    assert main(["forget", "--chat", CHAT, "--id", "m4", "--json"]) == 0
    assert holders(home, b"qvzplover") == []
    stored = lancedb.connect(str(home / "lancedb")).open_table("retrieval_events").to_arrow().to_pylist()
    assert [(e["session_id"], e["query"], e["returned_ids"]) for e in stored] == [
        ("[forgotten]-hunt", "where is the [forgotten] [forgotten]?", ["[forgotten]", "m6"])
    ] * 2
    with Runner(built_home[0], progress=lambda line: None) as runner:  # Dagster still reads its records
        record = runner.instance.get_latest_materialization_event(dg.AssetKey("retrieval_event_stats"))
        metadata = {k: v.value for k, v in record.asset_materialization.metadata.items()}
        sources = {
            chat: runner.instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=dg.AssetKey("messages"), asset_partitions=[chat]), limit=1
            )
            .records[0]
            .asset_materialization.metadata["source"]
            .value
            for chat in (CHAT, FILE_CHAT)
        }
    assert (metadata["followed_up_queries"], metadata["export"]) == (1, "exports/retrieval_training_examples.jsonl")
    # files named relative to their folder (NM_HOME, the data folder), never by absolute path
    assert sources == {CHAT: "live/notes_Ada_Bo.jsonl", FILE_CHAT: f"{FILE_CHAT}.json"}
