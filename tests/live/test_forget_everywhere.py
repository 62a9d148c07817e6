"""Forget leaves no byte of a message anywhere under NM_HOME: a live chat with a unique sentinel
sentence, its layers built through Dagster (a real instance in a tmp NM_HOME), a search (a
recall-run file) and an ask (a retrieval event) that quote it, then DELETE; every file is
searched byte by byte (parquet files also read, their pages are compressed) and the API's
search, ask and transcript answers no longer hold it. A token cannot forget in another chat."""

from __future__ import annotations

import json
import os
from pathlib import Path

import lancedb
import polars as pl
from starlette.testclient import TestClient

from api.access import add_token, load_tokens
from api.app import create_app
from api.live import mount_live
from cli.main import main
from narrative_mirror.events.writer import EventLog
from narrative_mirror.index_store import IndexStore
from narrative_mirror.live.memory import LiveMemory
from narrative_mirror.retrieval.engine import Retriever

CHAT = "notes_Ada_Bo"
SENTINEL = "The brass key for locker seven is taped under the qvzplover bench."
UNIQUE = b"qvzplover"  # the sentence's one word no other message has
MESSAGES = [
    ("m1", "Ada", "Morning Bo, did you feed the cat before leaving?"),
    ("m2", "Bo", "Yes, and I watered the basil on the balcony too."),
    ("m3", "Ada", "Good. Remember the gym bag for tonight."),
    ("m4", "Ada", SENTINEL),
    ("m5", "Bo", "Got it, thanks. I will grab the bag after work."),
    ("m6", "Ada", "Dinner at the Thai place tonight at seven?"),
    ("m7", "Bo", "Sounds great, I will book a table for two."),
]


def holders(home: Path) -> list[str]:
    """Files under ``home`` holding the unique word, any case: raw bytes, and the rows of every
    parquet file (compressed on disk)."""
    found = []
    for path in sorted(p for p in home.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if UNIQUE in data.lower() or UNIQUE in data.decode("utf-8", "replace").encode("utf-16-le").lower():
            found.append(str(path.relative_to(home)))
        elif data[:4] == b"PAR1" and UNIQUE.decode() in str(pl.read_parquet(path).to_dicts()).lower():
            found.append(str(path.relative_to(home)) + " (rows)")
    return found


def test_forget_leaves_no_byte_of_the_sentinel(tmp_path, embedder, monkeypatch, capsys):
    from resources import dagster_resources, runtime

    monkeypatch.setattr(runtime, "embedder", lambda *args, **kwargs: embedder)
    monkeypatch.setattr(dagster_resources, "build_embedder", lambda *args, **kwargs: embedder)
    home = Path(os.environ["NM_HOME"])
    data = tmp_path / "data"
    data.mkdir()
    batch = tmp_path / "batch.jsonl"
    batch.write_text(
        "".join(
            json.dumps({"id": i, "author": a, "text": t, "timestamp": f"2025-03-01T08:0{n}:00Z"}) + "\n"
            for n, (i, a, t) in enumerate(MESSAGES)
        )
    )
    assert main(["add", "--chat", CHAT, "--file", str(batch), "--json"]) == 0
    assert main(["build", "--data", str(data), "--json"]) == 0  # L1/L1.5/L2 and the index, through Dagster
    built = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert built["per_file"][CHAT]["messages"] == 7 and built["per_file"][CHAT]["blocks"] >= 1

    tokens = tmp_path / "tokens.json"
    owner = {"Authorization": f"Bearer {add_token(tokens, 'owner', ['notes_*'], ['read', 'add', 'forget'])}"}
    stranger = {"Authorization": f"Bearer {add_token(tokens, 'stranger', ['other_*'], ['read', 'add', 'forget'])}"}
    store = IndexStore(str(home / "lancedb"))
    retriever = Retriever(store, embedder)
    app = create_app(
        retriever,
        EventLog(store.uri, spool_dir=home / "events" / "spool"),
        runs_root=home / "recall_runs",
        tokens=load_tokens(tokens),
    )
    mount_live(app, app.state.api, LiveMemory(home / "live", store, embedder, on_indexed=retriever.invalidate))
    question = f'Who wrote "{SENTINEL}"?'
    with TestClient(app, base_url="http://localhost") as client:
        hits = client.get("/api/memory/search", params={"chat": CHAT, "q": SENTINEL, "k": 3}, headers=owner).json()
        assert hits["hits"][0]["id"] == "m4"
        asked = client.post("/api/ask", json={"chat": CHAT, "question": question, "profile": "fast"}, headers=owner)
        assert asked.status_code == 200 and "m4" in asked.text
        app.state.api.event_log.flush()
        before = holders(home)
        assert "live/notes_Ada_Bo.jsonl" in before and "storage/messages/notes_Ada_Bo.parquet (rows)" in before
        assert any(h.startswith("recall_runs/") for h in before)  # the search's run record
        assert any(h.startswith("lancedb/retrieval_events.lance/") for h in before)  # the ask's event
        assert any(h.startswith("lancedb/messages.lance/") for h in before)

        refused = client.delete(f"/api/chats/{CHAT}/messages/m4", headers=stranger)
        assert (refused.status_code, refused.json()["error"]["field"]) == (403, "chat")
        assert client.delete(f"/api/chats/{CHAT}", headers=stranger).status_code == 403
        assert (
            client.delete(f"/api/chats/{CHAT}/messages", params={"author": "Ada"}, headers=stranger).status_code == 403
        )
        response = client.delete(f"/api/chats/{CHAT}/messages/m4", headers=owner)
        assert response.status_code == 200, response.text
        report = response.json()

        assert holders(home) == []
        removed = report["removed"]
        assert removed["live_log"] == {"messages": 1}
        assert (
            removed["index"]["messages_rows"] == 1
            and removed["index"]["blocks_rows"] == built["per_file"][CHAT]["blocks"]
        )
        # the search's and the ask's events; the search's recall-run file (an ask writes none)
        assert removed["events"]["events_redacted"] == 2 and removed["recall_runs"]["files_redacted"] == 1
        # the chat's layers are deleted for the next build to redo; its vectors lose m4's row only
        assert (removed["layers"]["files_deleted"], removed["layers"]["rows_removed"]) == (7, 1)
        assert not list((home / "live" / "forgetting").glob("*.json"))  # the journal is gone
        answers = [
            client.get("/api/memory/search", params={"chat": CHAT, "q": SENTINEL, "k": 7}, headers=owner),
            client.get(
                "/api/memory/search", params={"chat": CHAT, "q": "qvzplover", "k": 7, "variant": "bm25"}, headers=owner
            ),
            client.post(
                "/api/ask",
                json={"chat": CHAT, "question": "Where is the brass key for locker seven?", "profile": "fast"},
                headers=owner,
            ),
            client.get(f"/chats/{CHAT}", headers=owner),
        ]
        assert [r.status_code for r in answers] == [200, 200, 200, 200]
        shown = [
            json.dumps(answers[0].json()["hits"]),
            json.dumps(answers[1].json()["hits"]),
            answers[2].text,
            answers[3].text,
        ]  # a search answer repeats its query: its hits are what it found
        assert [UNIQUE.decode() in text.lower() for text in shown] == [False] * 4
        assert "m4" not in [h["id"] for h in answers[0].json()["hits"]] and answers[1].json()["hits"] == []
        assert client.delete(f"/api/chats/{CHAT}/messages/m4", headers=owner).status_code == 404
    db = lancedb.connect(str(home / "lancedb"))
    events = db.open_table("retrieval_events").to_arrow().sort_by("created_at").column("query").to_pylist()
    assert events[:2] == ["[forgotten]", 'Who wrote "[forgotten]"?']  # redacted in place, the rest kept
    assert db.open_table("messages").count_rows(f"chat_file = '{CHAT}'") == 6
