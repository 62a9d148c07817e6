"""A person's own exports on first contact: the realistic corpus of every format builds on the
first run, every chat is served and listed by its readable key; and the commands of
docs/bring-your-own-chats.md run as written on a WhatsApp zip, a Telegram export and a Slack zip."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from fixtures.realistic_exports import slack, telegram, whatsapp_ios_zip, write_corpus
from loopback import free_port

from cli.main import main
from narrative_mirror.storage import frame_path, read_frame

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "bring-your-own-chats.md"
CLI = [sys.executable, "-m", "cli.main"]


def _json(capsys, argv: list[str]) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_the_corpus_builds_on_the_first_run_and_every_chat_is_served_by_its_readable_key(tmp_path, capsys):
    from resources import runtime

    data = tmp_path / "chats"
    expected = write_corpus(data)
    code, built = _json(capsys, ["build", "--data", str(data)])
    assert (code, built["not_built"], built["problems"], built["failures"]) == (0, {}, [], [])
    assert built["built"] == built["chat_files"] == len(expected)

    code, listed = _json(capsys, ["chats", "--data", str(data)])
    rows = {row["chat"]: row for row in listed["chats"]}
    assert code == 0 and sorted(rows) == sorted(chat.key for chat in expected)
    store = runtime.index_from_environment()
    home = Path(os.environ["NM_HOME"])
    for chat in expected:
        row = rows[chat.key]
        assert (chat.name in row["name"], row["format"], row["built"], row["why_not"]) == (
            True,
            chat.format,
            True,
            None,
        )
        assert set(chat.people) <= set(row["participants"]), row  # real names (Slack: users.json's)
        assert row["first"] == ("2024-06-12" if chat.format == "slack" else "2024-06-13")  # Slack: joins the day before
        # Served: the index holds every message but the system lines, and the blocking check agreed.
        messages = read_frame(frame_path(home / "storage", "messages", chat.key))
        assert store.chat_row_count("messages", chat.key) == messages.height - messages["system"].sum() > 0
    family = read_frame(frame_path(home / "storage", "messages", "whatsapp_family_trip"))
    assert family["system"].sum() >= 6  # the encryption notice, created, added x3, left

    code, found = _json(capsys, ["search", "--data", str(data), "--all", "storm warning", "-k", "3"])
    assert code == 0 and len(found["chats"]) == len(expected) and "warnings" not in found
    assert found["hits"][0]["chat"] == "telegram_climbing_crew"

    # Membership is answered from each format's own join or leave line, with that line as the evidence.
    for chat, question, day, line in [
        ("whatsapp_family_trip", "When did Dev join the group?", "13 June 2024", "Ana Ruiz added Dev Patel"),
        ("telegram_climbing_crew", "When did Sara leave the group?", "13 June 2024", "Sara Klein left the group"),
        ("slack_general", "When did Ben join the channel?", "12 June 2024", "@Ben Okafor has joined the channel"),
        ("discord_trail-talk", "When did quinn join the server?", "13 June 2024", "quinn joined the server"),
    ]:
        code, answered = _json(capsys, ["ask", "--data", str(data), "--chat", chat, question])
        assert (code, answered["answer"], [e["text"] for e in answered["evidence"]]) == (0, day, [line]), chat
    # Times in each chat's own zone, with their offset: Telegram's as written (Berlin), Slack's from users.json (Madrid).
    code, story = _json(
        capsys, ["arc", "--data", str(data), "--chat", "telegram_climbing_crew", "How did the plan change?"]
    )
    stamps = [m["timestamp"] for m in story["evidence_messages"]]
    assert code == 0 and stamps and all(t.endswith("+02:00") for t in stamps) and story["time_zones"] == ["UTC+02:00"]
    code, slack_answer = _json(capsys, ["ask", "--data", str(data), "--chat", "slack_general", "Who brings the stove?"])
    assert code == 0 and slack_answer["time_zones"] == ["Europe/Madrid"]
    assert all(e["timestamp"].endswith("+02:00") for e in slack_answer["evidence"])
    # An ordinary question is searched as always: no system line is its evidence.
    code, ordinary = _json(capsys, ["ask", "--data", str(data), "--chat", "whatsapp_family_trip", "Who added gas?"])
    system_ids = set(family.filter(family["system"])["local_id"])
    assert code == 0 and ordinary["evidence"] and not system_ids & {e["id"] for e in ordinary["evidence"]}


def _doc_commands() -> list[str]:
    """The ``narrative-mirror`` lines of the doc's "Build, list, ask, serve" block."""
    section = DOC.read_text(encoding="utf-8").split("## 2.", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    return [line.strip() for line in section.splitlines() if line.strip().startswith("narrative-mirror ")]


@pytest.mark.slow
def test_the_docs_commands_run_as_written_on_a_whatsapp_zip_a_telegram_export_and_a_slack_zip(tmp_path):
    data = tmp_path / "chats"
    data.mkdir()
    keys = [whatsapp_ios_zip(data).key, telegram(data).key, *(c.key for c in slack(data))]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    commands = _doc_commands()
    assert [c.split()[1] for c in commands] == ["build", "chats", "ask", "search", "serve"]
    for command in commands:
        argv = [a.replace("~/chats", str(data)) for a in shlex.split(command)[1:]]
        if argv[0] == "serve":
            _serve(argv, env, keys)
            continue
        proc = subprocess.run([*CLI, *argv], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
        assert proc.returncode == 0, (command, proc.stderr[-3000:])
        if argv[0] == "chats":
            assert [line.split()[0] for line in proc.stdout.splitlines()[2:]] == sorted(keys)
        if argv[0] == "ask":
            assert re.search(r"^Answer: .+", proc.stdout) and "\nEvidence" in proc.stdout


def _serve(argv: list[str], env: dict, keys: list[str]) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [*CLI, *argv, "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        deadline = time.time() + 240
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=10) as response:
                    health = json.load(response)
                break
            except (urllib.error.URLError, ConnectionError):
                assert proc.poll() is None and time.time() < deadline, proc.stderr.read()[-3000:]
                time.sleep(0.5)
        assert sorted(health["chats"]) == sorted(keys) and health["unavailable"] == {}
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)
    assert f"serving {len(keys)} of {len(keys)} chat files ({', '.join(sorted(keys))}) on" in err
