"""Forget by author, by UTC time range and a whole chat (API and CLI), the refusals (a token
outside its chat, a bad time, no criterion), and the redaction rules (whole words only, JSON
forms, same-length overwrite of a spool)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from starlette.testclient import TestClient

from api.access import add_token, load_tokens
from api.app import create_app
from api.live import mount_live
from cli.main import main
from narrative_mirror.events.writer import EventLog
from narrative_mirror.index_store import IndexStore
from narrative_mirror.live.memory import LiveMemory
from narrative_mirror.live.redaction import Redactor, distinctive_words
from narrative_mirror.retrieval.engine import Retriever

TRIP = [
    {"id": "t1", "author": "Ada", "text": "Booked the train to Porto for Friday.", "timestamp": "2025-05-01T09:00:00Z"},
    {
        "id": "t2",
        "author": "Bo",
        "text": "I will pack the tent and the stove.",
        "timestamp": "2025-05-01T10:00:00+02:00",
    },
    {"id": "t3", "author": "Bo", "text": "Found the ferry times for Sunday.", "timestamp": "2025-05-02T09:00:00Z"},
    {"id": "t4", "author": "Ada", "text": "Remember the sunscreen this time.", "timestamp": "2025-05-03T09:00:00Z"},
]


def app_over(home: Path, embedder, tokens=None):
    store = IndexStore(str(home / "lancedb"))
    retriever = Retriever(store, embedder)
    app = create_app(
        retriever,
        EventLog(store.uri, spool_dir=home / "events" / "spool"),
        runs_root=home / "recall_runs",
        tokens=tokens,
    )
    mount_live(app, app.state.api, LiveMemory(home / "live", store, embedder, on_indexed=retriever.invalidate))
    return app, store


def test_forget_by_author_and_time_range_then_the_whole_chat(embedder, tmp_path):
    home = Path(os.environ["NM_HOME"])
    path = tmp_path / "tokens.json"
    owner = {"Authorization": f"Bearer {add_token(path, 'owner', ['trip_*'], ['read', 'add', 'forget'])}"}
    reader = {"Authorization": f"Bearer {add_token(path, 'reader', ['*'], ['read', 'add'])}"}
    app, store = app_over(home, embedder, load_tokens(path))
    with TestClient(app, base_url="http://localhost") as client:
        assert client.post("/api/chats/trip_Ada_Bo/messages", json={"messages": TRIP}, headers=owner).status_code == 200
        # Bo's messages from 1 May 08:00 UTC (t2 was written at 10:00+02:00) up to 2 May 09:00, excluded
        by_range = client.delete(
            "/api/chats/trip_Ada_Bo/messages",
            headers=owner,
            params={"author": "Bo", "since": "2025-05-01T08:00:00Z", "until": "2025-05-02T09:00:00Z"},
        )
        assert by_range.status_code == 200, by_range.text
        assert (by_range.json()["ids"], by_range.json()["selection"]) == (
            ["t2"],
            {"author": "Bo", "since": "2025-05-01T08:00:00Z", "until": "2025-05-02T09:00:00Z"},
        )
        by_author = client.delete("/api/chats/trip_Ada_Bo/messages", params={"author": "Ada"}, headers=owner)
        assert by_author.json()["ids"] == ["t1", "t4"]
        assert [m["local_id"] for m in store.messages_for("trip_Ada_Bo").to_dicts()] == ["t3"]
        refusals = [
            client.delete("/api/chats/trip_Ada_Bo", headers=reader),
            client.delete("/api/chats/other_chat", headers=owner),
            client.delete("/api/chats/no_such_chat/messages/x", headers=owner),
            client.delete("/api/chats/no_such_chat/messages", params={"since": "soon"}, headers=owner),
        ]
        assert {(r.status_code, r.text) for r in refusals} == {
            (403, '{"error":{"field":"chat","message":"this API token may not forget messages of that chat"}}')
        }
        bad = [
            client.delete("/api/chats/trip_Ada_Bo/messages", headers=owner),
            client.delete("/api/chats/trip_Ada_Bo/messages", params={"since": "soon"}, headers=owner),
            client.delete(
                "/api/chats/trip_Ada_Bo/messages",
                params={"since": "2025-05-02T00:00:00Z", "until": "2025-05-01T00:00:00Z"},
                headers=owner,
            ),
        ]
        assert [(r.status_code, r.json()["error"]["field"]) for r in bad] == [
            (400, "author"),
            (400, "since"),
            (400, "until"),
        ]
        assert (
            client.delete("/api/chats/trip_Ada_Bo/messages", params={"author": "Cy"}, headers=owner).status_code == 404
        )
        whole = client.delete("/api/chats/trip_Ada_Bo", headers=owner)
        assert whole.status_code == 200 and whole.json()["removed"]["live_log"] == {"messages": 1, "log_deleted": 1}
        assert client.delete("/api/chats/trip_Ada_Bo", headers=owner).status_code == 404
        assert client.delete("/api/chats/trip_no_such", headers=owner).status_code == 404
    assert not (home / "live" / "trip_Ada_Bo.jsonl").exists()
    assert store.chat_rows("trip_Ada_Bo") == {"messages": 0, "blocks": 0, "threads": 0}


def test_cli_forget_by_author_range_and_all(embedder, tmp_path, capsys, monkeypatch):
    from resources import runtime

    monkeypatch.setattr(runtime, "embedder", lambda *args: embedder)
    source = tmp_path / "trip.jsonl"
    source.write_text("".join(json.dumps(m) + "\n" for m in TRIP))
    assert main(["add", "--chat", "trip_Ada_Bo", "--file", str(source), "--json"]) == 0
    capsys.readouterr()
    assert main(["forget", "--chat", "trip_Ada_Bo", "--since", "2025-05-02T00:00:00Z", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ids"] == ["t3", "t4"]
    assert main(["forget", "--chat", "trip_Ada_Bo", "--author", "Bo", "--until", "2025-05-02T00:00:00Z", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ids"] == ["t2"]
    assert main(["forget", "--chat", "trip_Ada_Bo", "--id", "t1", "--until", "2025-05-02T00:00:00Z"]) == 2
    assert "--until" in capsys.readouterr().err
    assert main(["forget", "--chat", "trip_Ada_Bo", "--all", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["ids"], report["whole_chat"], report["removed"]["index"]["messages_rows"]) == (["t1"], True, 1)
    assert main(["forget", "--chat", "trip_Ada_Bo", "--all"]) == 2
    assert "no live chat 'trip_Ada_Bo'" in capsys.readouterr().err


def test_redaction_replaces_texts_and_whole_distinctive_words_only():
    words = distinctive_words(["Share the vault code k7qz with nobody"], ["Nobody likes the vault", "see you"])
    assert words == ["code", "k7qz", "share"]  # "with", "the" are stop words; "vault", "nobody" are kept ones'
    redactor = Redactor(['He said "go" at noon, twice'], words)
    assert (
        redactor.redact("unresolved_gold_share: SHARE the k7qz!")
        == "unresolved_gold_share: [forgotten] the [forgotten]!"
    )
    assert redactor.redact(json.dumps({"q": 'He said "go" at noon, twice'})) == '{"q": "[forgotten]"}'
    assert redactor.redact("k7qz", words=False) == "k7qz"  # SQLite rows: whole texts only
    spool = b'{"query": "the k7qz code"}\n'
    assert redactor.same_length(spool) == b'{"query": "the #### ####"}\n'
    quoted = b"x" + json.dumps('He said "go" at noon, twice').encode()
    assert redactor.same_length(quoted) == b'x"[forgotten]##################"' and len(quoted) == 32
