"""``narrative-mirror add`` (JSON lines into a live chat, searchable when it returns) and
``token add --rights``."""

from __future__ import annotations

import json
import os

from cli.main import main
from narrative_mirror.index_store import IndexStore

LINES = [
    {
        "id": "a1",
        "author": "Ines",
        "text": "The Lisbon half marathon starts at the Vasco da Gama bridge.",
        "timestamp": "2025-03-01T08:00:00Z",
    },
    {
        "author": "Kofi",
        "text": "Then we take the early ferry from Barreiro.",
        "timestamp": "2025-03-01T08:01:00Z",
        "reply_to": "a1",
    },
]


def test_add_reads_json_lines_and_a_resend_stores_nothing(tmp_path, capsys, embedder, monkeypatch):
    from resources import runtime

    monkeypatch.setattr(runtime, "embedder", lambda *args: embedder)  # the real one, loaded once per session
    source = tmp_path / "batch.jsonl"
    source.write_text("\n".join(json.dumps(line) for line in LINES) + "\n\n")
    assert main(["add", "--chat", "run_Ines_Kofi", "--file", str(source), "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert (first["added"], first["ids"], first["created"]) == (2, ["a1", "L1"], True)
    assert main(["add", "--chat", "run_Ines_Kofi", "--file", str(source), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["added"], again["duplicates"], again["ids"]) == (0, 2, ["a1", "L1"])
    store = IndexStore(str(tmp_path / "nm_home" / "lancedb"))
    assert [mid for mid, _ in store.full_text_search("messages", "run_Ines_Kofi", "ferry Barreiro", 5)] == [
        "run_Ines_Kofi/L1"
    ]
    log = tmp_path / "nm_home" / "live" / "run_Ines_Kofi.jsonl"
    assert len(log.read_text().splitlines()) == 2 and oct(os.stat(log).st_mode & 0o777) == "0o600"
    assert main(["forget", "--chat", "run_Ines_Kofi", "--id", "L1", "--json"]) == 0
    removed = json.loads(capsys.readouterr().out)["removed"]
    assert (removed["live_log"], removed["index"]["messages_rows"]) == ({"messages": 1}, 1)
    assert store.full_text_search("messages", "run_Ines_Kofi", "ferry Barreiro", 5) == []
    assert "Barreiro" not in log.read_text()
    assert main(["forget", "--chat", "run_Ines_Kofi", "--id", "L1"]) == 2
    assert "no message with that id" in capsys.readouterr().err


def test_add_refuses_a_bad_line_before_storing_anything(tmp_path, capsys):
    source = tmp_path / "batch.jsonl"
    source.write_text(json.dumps(LINES[0]) + "\n" + json.dumps({**LINES[1], "timestamp": "later"}) + "\n")
    assert main(["add", "--chat", "run_Ines_Kofi", "--file", str(source)]) == 2
    assert "messages[1].timestamp" in capsys.readouterr().err
    assert not (tmp_path / "nm_home" / "live" / "run_Ines_Kofi.jsonl").exists()


def test_token_add_with_rights(tmp_path, capsys):
    path = tmp_path / "tokens.json"
    assert (
        main(
            [
                "token",
                "add",
                "--tokens",
                str(path),
                "--name",
                "app",
                "--chat",
                "team_*",
                "--rights",
                "read,add",
                "--json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["rights"] == ["read", "add"]
    assert main(["token", "add", "--tokens", str(path), "--name", "old", "--chat", "*", "--json"]) == 0
    capsys.readouterr()
    assert [row["rights"] for row in json.loads(path.read_text())["tokens"]] == [["read", "add"], ["read"]]
    assert main(["token", "add", "--tokens", str(path), "--name", "bad", "--chat", "*", "--rights", "write"]) == 2
    assert "rights" in capsys.readouterr().err
