"""Rights that `token add` grants, on a real app, a real LanceDB and the real embedder: replacing a
chat file's chat with a live chat takes the ``replace`` right (``add`` alone never empties a chat
for every reader); a token with an expiry is refused from then on."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from memory_api_chat import CHAT, build_retriever
from starlette.testclient import TestClient

from api.access import TokenFileError, add_token, expiry, load_tokens
from api.app import create_app
from api.live import mount_live
from cli.main import main
from narrative_mirror.events.writer import EventLog
from narrative_mirror.live.memory import serving_memory

NOTE = {
    "id": "n1",
    "author": "Ana",
    "text": "The quince tart sold out before noon.",
    "timestamp": "2025-05-02T11:00:00Z",
}


def cli_token(capsys, path, name: str, rights: str, *extra: str) -> dict:
    assert (
        main(
            [
                "token",
                "add",
                "--tokens",
                str(path),
                "--name",
                name,
                "--chat",
                "tiny_*",
                "--rights",
                rights,
                *extra,
                "--json",
            ]
        )
        == 0
    )
    return json.loads(capsys.readouterr().out)


def test_an_add_only_token_cannot_replace_a_chat_files_chat_and_a_replace_token_can(tmp_path, embedder, capsys):
    retriever = build_retriever(tmp_path / "lancedb", embedder)  # CHAT, built from a chat file
    file_rows = retriever.store.chat_row_count("messages", CHAT)
    path = tmp_path / "tokens.json"
    adder = {"Authorization": f"Bearer {cli_token(capsys, path, 'adder', 'read,add')['token']}"}
    granted = cli_token(capsys, path, "replacer", "read,add,replace")
    assert granted["rights"] == ["read", "add", "replace"]
    replacer = {"Authorization": f"Bearer {granted['token']}"}
    app = create_app(retriever, EventLog(tmp_path / "events"), runs_root=tmp_path / "runs", tokens=load_tokens(path))
    mount_live(app, app.state.api, serving_memory(tmp_path / "live", retriever))
    with TestClient(app, base_url="http://localhost", raise_server_exceptions=False) as client:
        refused = client.post(
            f"/api/chats/{CHAT}/messages", headers=adder, json={"messages": [NOTE], "replace_file_chat": True}
        )
        assert refused.status_code == 403 and refused.json()["error"]["field"] == "replace_file_chat"
        assert retriever.store.chat_row_count("messages", CHAT) == file_rows > 1  # nothing was replaced
        assert not (tmp_path / "live" / f"{CHAT}.wins").exists()
        hits = client.get("/api/memory/search", headers=adder, params={"chat": CHAT, "q": "bakery", "k": 3}).json()[
            "hits"
        ]
        assert len(hits) == 3
        replaced = client.post(
            f"/api/chats/{CHAT}/messages", headers=replacer, json={"messages": [NOTE], "replace_file_chat": True}
        )
        assert replaced.status_code == 200 and replaced.json()["stored"] == ["n1"]
    assert retriever.store.chat_row_count("messages", CHAT) == 1


def test_a_token_is_refused_once_it_expires(tmp_path, embedder, capsys):
    path = tmp_path / "tokens.json"
    soon = cli_token(capsys, path, "soon", "read", "--expires", "2h")
    expires = datetime.strptime(soon["expires"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert timedelta(hours=1, minutes=59) < expires - datetime.now(UTC) <= timedelta(hours=2)
    assert json.loads(path.read_text())["tokens"][0]["expires"] == soon["expires"]
    old = add_token(path, "old", ["tiny_*"], expires="2020-01-01T00:00:00Z")  # as the file says after it passed
    retriever = build_retriever(tmp_path / "lancedb", embedder)
    app = create_app(retriever, EventLog(tmp_path / "events"), runs_root=tmp_path / "runs", tokens=load_tokens(path))
    with TestClient(app, base_url="http://localhost") as client:
        assert client.get("/api/health", headers={"Authorization": f"Bearer {soon['token']}"}).status_code == 200
        assert client.get("/api/health", headers={"Authorization": f"Bearer {old}"}).status_code == 401
    assert main(["token", "add", "--tokens", str(path), "--name", "x", "--chat", "a", "--expires", "soonish"]) == 2
    assert "--expires must be a duration" in capsys.readouterr().err
    for wrong in ("2020-01-01", "0d"):
        try:
            expiry(wrong)
        except TokenFileError:
            continue
        raise AssertionError(f"{wrong!r} accepted")
