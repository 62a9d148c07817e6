"""A chat file's chat and a live chat share a name only when the user says the live one wins
(``add --replace-file-chat`` / ``"replace_file_chat": true``): refused with one line otherwise,
by the API, the CLI and the build; chosen, the file's rows leave the index at once and every
build reads the live chat for that name. Real LanceDB, real embedder, real app."""

from __future__ import annotations

import json
import shutil

from memory_api_chat import CHAT, build_retriever
from starlette.testclient import TestClient

from api.app import create_app
from api.live import mount_live
from cli.main import main
from narrative_mirror.events.writer import EventLog
from narrative_mirror.live.log import LiveLog
from narrative_mirror.live.memory import serving_memory
from narrative_mirror.live.source import find_chats
from narrative_mirror.settings import DEMO_DATA_DIR

REFUSED = (
    'a chat built from a chat file has that name; add with --replace-file-chat (API: "replace_file_chat": '
    "true) to make the live chat replace it"
)
NOTE = {
    "id": "n1",
    "author": "Ana",
    "text": "The quince tart sold out before noon.",
    "timestamp": "2025-05-02T11:00:00Z",
}


def test_the_api_refuses_a_file_chats_name_unless_the_live_chat_replaces_it(tmp_path, embedder):
    retriever = build_retriever(tmp_path / "lancedb", embedder)  # CHAT, built from a chat file
    file_rows = retriever.store.chat_row_count("messages", CHAT)
    app = create_app(retriever, EventLog(tmp_path / "events"), runs_root=tmp_path / "runs")
    mount_live(app, app.state.api, serving_memory(tmp_path / "live", retriever))
    with TestClient(app, base_url="http://localhost", raise_server_exceptions=False) as client:
        before = [
            h["id"]
            for h in client.get("/api/memory/search", params={"chat": CHAT, "q": "bakery", "k": 3}).json()["hits"]
        ]
        refused = client.post(f"/api/chats/{CHAT}/messages", json={"messages": [NOTE]})
        assert (refused.status_code, refused.json()) == (409, {"error": {"field": "chat", "message": REFUSED}})
        assert retriever.store.chat_row_count("messages", CHAT) == file_rows > 0 and before
        wrong = client.post(f"/api/chats/{CHAT}/messages", json={"messages": [NOTE], "replace_file_chat": "yes"})
        assert wrong.status_code == 400 and wrong.json()["error"]["field"] == "replace_file_chat"
        replaced = client.post(f"/api/chats/{CHAT}/messages", json={"messages": [NOTE], "replace_file_chat": True})
        assert replaced.status_code == 200 and replaced.json()["stored"] == ["n1"]
        hits = client.get("/api/memory/search", params={"chat": CHAT, "q": "bakery quince tart", "k": 3}).json()["hits"]
        assert [h["id"] for h in hits] == ["n1"]  # the file's messages are gone from the index
    assert retriever.store.chat_row_count("messages", CHAT) == 1
    assert retriever.store.blocks_for(CHAT).height == 0
    assert (tmp_path / "live" / f"{CHAT}.wins").read_text() == "live\n"


def test_the_cli_and_the_build_refuse_both_until_the_live_chat_is_chosen(tmp_path, capsys):
    from resources import environment

    data = tmp_path / "data"
    shutil.copytree(DEMO_DATA_DIR, data)
    name = sorted(p.name[:-5] for p in data.glob("*.json") if not p.name.endswith(".arcs.json"))[0]
    live_root = environment.nm_home() / "live"
    LiveLog(live_root).append(name, [NOTE])  # a live chat first, then a chat file of that name
    chats, problems = find_chats(data, home=environment.nm_home())
    assert name not in chats and problems == [
        f"{data / (name + '.json')}: a live chat of this home has the same name ({name!r}): neither is built until one "
        f"is renamed or you {REFUSED.split('; ')[1]}"
    ]
    lines = tmp_path / "more.jsonl"
    lines.write_text(json.dumps({**NOTE, "id": "n2", "text": "Two more quince tarts for Friday."}) + "\n")
    assert main(["add", "--chat", name, "--file", str(lines), "--replace-file-chat", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stored"] == ["n2"]
    chats, problems = find_chats(data, home=environment.nm_home())
    assert problems == [] and (chats[name].format, chats[name].path) == ("live", live_root / f"{name}.jsonl")
    assert len(chats) == 3
