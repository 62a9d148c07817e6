"""Chat exports through the command line (real Dagster instance and embedder): a re-export encodes
only what is new or edited, bad exports and broken chat files are one line each (exit 2) while the
good chats build, a broken file is not run again until it changes, and two data folders on one
home do not rebuild a shared chat back and forth."""

from __future__ import annotations

import json
import shutil
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from cli.broken import NOT_RETRIED
from cli.main import main
from instance.lifecycle import dagster_home

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "narrative_mirror" / "exports"))
import writers  # noqa: E402

T0 = datetime(2024, 5, 13, 7, 0, tzinfo=UTC)


def _messages(n: int) -> list:
    topics = ["the garden", "a bike ride", "the new job", "dinner plans", "the cat", "a book"]
    return [
        (
            "Ana" if i % 2 == 0 else "Ben",
            T0 + timedelta(minutes=11 * i),
            f"message {i}: thinking about {topics[i % len(topics)]} again, part {i}",
            None,
        )
        for i in range(n)
    ]


def _build(capsys, data: Path, *flags: str) -> tuple[int, dict]:
    code = main(["build", "--data", str(data), "--json", *flags])
    return code, json.loads(capsys.readouterr().out)


def _runs(partition: str) -> int:
    with dg.DagsterInstance.from_config(str(dagster_home())) as instance:
        return instance.get_runs_count(filters=dg.RunsFilter(tags={"dagster/partition": partition}))


def _realtalk(path: Path, texts: list[str], speaker_2: int = 5) -> Path:
    messages = [
        {
            "dia_id": f"D1:{i + 1}",
            "speaker": "Ana" if i % 2 == 0 else "Ben",
            "clean_text": text,
            "date_time": f"01.03.2024, 10:{i:02d}:00",
        }
        for i, text in enumerate(texts)
    ]
    if speaker_2 != 5:
        messages[1]["speaker"] = speaker_2  # not a string: the chat file is broken
    path.write_text(json.dumps({"name": {"speaker_1": "Ana", "speaker_2": "Ben"}, "session_1": messages}))
    return path


def test_a_longer_whatsapp_export_with_one_edit_encodes_21_messages(tmp_path, capsys):
    data = tmp_path / "chats"
    data.mkdir()
    old = _messages(30)
    writers.whatsapp_android(old, data, tz="Europe/Lisbon", title="Ben")
    code, first = _build(capsys, data, "--tz", "Europe/Lisbon")
    assert (code, first["chat_files"], first["messages"], first["encoded_messages"]) == (0, 1, 30, 30)
    newer = old + _messages(50)[30:]
    author, moment, text, reply = newer[12]
    newer[12] = (author, moment, text.replace("thinking", "still thinking") + " <This message was edited>", reply)
    writers.whatsapp_android(newer, data, tz="Europe/Lisbon", title="Ben")  # the same file name: a re-export
    code, second = _build(capsys, data)  # --tz remembered for the folder
    assert (code, second["messages"], second["encoded_messages"]) == (0, 50, 21)
    assert second["per_file"]["whatsapp_ben"]["encoded_messages"] == 21
    assert set(second["per_file"]["whatsapp_ben"]["seconds"]) == {"encode", "other"}


def test_bad_exports_and_a_broken_file_are_reported_every_time_but_run_once(tmp_path, capsys):
    data = tmp_path / "chats"
    data.mkdir()
    writers.discord(_messages(6), data, tz="UTC")
    # Every date with both fields <= 12: WhatsApp's day order cannot be told from the file.
    writers.whatsapp_ios([("Ana", datetime(2024, 3, 5, 8, tzinfo=UTC), "hi", None)], data, tz="UTC", title="Amb")
    broken = _realtalk(data / "old_chat.json", ["one", "two", "three"], speaker_2=7)
    ambiguous = (
        f"{data / 'WhatsApp Chat - Amb' / '_chat.txt'}: line 1: 05/03/2024 could be 5 March or "
        "3 May 2024; pass --day-first or --month-first"
    )
    broken_line = "old_chat.json: session_1[1].speaker is int; expected a string"

    code, first = _build(capsys, data)
    assert code == 2
    assert first["problems"] == [ambiguous, broken_line]
    assert (first["chat_files"], first["built"], list(first["not_built"])) == (2, 1, ["old_chat"])
    assert _runs("old_chat") == 1

    code, second = _build(capsys, data)
    assert code == 2 and second["problems"] == [ambiguous, f"{broken_line} {NOT_RETRIED}"]
    assert _runs("old_chat") == 1  # remembered, not launched again
    assert list(second["not_built"]) == ["old_chat"]

    _realtalk(broken, ["one", "two", "three"])  # fixed
    code, third = _build(capsys, data)
    assert code == 2 and third["problems"] == [ambiguous]
    assert (third["built"], third["not_built"]) == (2, {})
    assert not (Path(dagster_home()).parent / "broken" / "old_chat.json").exists()


def test_two_data_folders_on_one_home_keep_a_shared_chat_apart(tmp_path, capsys):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    _realtalk(first / "shared_chat.json", ["we met at the lake", "the water was cold", "next week again"])
    assert _build(capsys, first)[0] == 0
    runs = _runs("shared_chat")
    _realtalk(second / "shared_chat.json", ["we met at the lake", "the water was warm", "next week again"])
    writers.discord(_messages(4), second, tz="UTC")
    code, out = _build(capsys, second)
    assert code == 2
    assert out["problems"] == [
        f"{second / 'shared_chat.json'}: chat 'shared_chat' is built on this NM_HOME from {first}, whose copy "
        "differs: not rebuilt from this folder (give this folder its own NM_HOME, or rename one of the two)"
    ]
    assert out["built"] == 1 and "discord_general" in out["per_file"]
    assert _runs("shared_chat") == runs
    assert _build(capsys, first)[1]["per_file"]["shared_chat"]["ran"] == []  # still fresh for the first folder
    shutil.rmtree(first)  # the first folder is gone: the second one takes the chat over
    code, out = _build(capsys, second)
    assert code == 0 and "messages" in out["per_file"]["shared_chat"]["ran"]


def test_an_unknown_zone_is_a_bad_argument_named_in_one_line(tmp_path, capsys):
    code, out = _build(capsys, tmp_path, "--tz", "Mars/Olympus_Mons")
    assert code == 2
    assert out["problems"] == [
        "--tz 'Mars/Olympus_Mons': not a time zone name (e.g. Europe/Berlin, America/New_York, UTC)"
    ]


@pytest.mark.slow  # a real build of two channels (about a minute on a loaded machine)
def test_an_unreadable_slack_message_is_one_build_warning_and_its_channel_is_served(tmp_path, capsys):
    from fixtures.realistic_exports import slack

    data = tmp_path / "chats"
    slack(data, as_zip=False)
    [day] = (data / "Acme Slack export Jun 3 2024 - Jun 10 2024" / "general").glob("2024-06-13.json")
    messages = json.loads(day.read_text(encoding="utf-8"))
    messages.insert(3, {"type": "message", "ts": "not-a-ts", "user": "U01ANA", "text": "lost"})
    day.write_text(json.dumps(messages), encoding="utf-8")

    code, built = _build(capsys, data)
    assert (code, built["built"], built["not_built"], built["failures"]) == (0, 2, {}, [])
    # One line naming the message, and no word about ARC cases: a folder of app exports has none to miss.
    assert built["warnings"] == [
        f"slack_general: 1 normalization(s), e.g. {day}: [3].ts: bad timestamp 'not-a-ts' "
        "(message ts not-a-ts left out; the rest of the channel is read)"
    ]
    assert built["per_file"]["slack_general"]["messages"] == 25
