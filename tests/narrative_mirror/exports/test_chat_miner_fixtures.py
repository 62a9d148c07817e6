"""The chat-miner fixtures (../shared/datasets/exports/chat-miner) read with exact counts, authors and UTC times."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from narrative_mirror.exports import detect, read_export


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def _one(path, **kwargs):
    conversations = list(read_export(path, **kwargs))
    assert len(conversations) == 1
    return conversations[0], list(conversations[0].messages())


WHATSAPP_FILES = [
    "test_ddmmyy_24hrs.txt",
    "test_mmddyy_24hrs.txt",
    "test_[mmddyy]_24hrs.txt",
    "test_mmddyyyy_12hrs.txt",
    "test_yyyymmdd_24hrs.txt",
]
# Europe/Berlin local times of the files (CET in winter, CEST in June) as UTC.
WHATSAPP_EXPECTED = [
    ("John Doe", "2019-01-01T10:25", "Lorem ipsum dolor sit amet.", False),
    ("John Doe", "2019-01-20T10:23", ".", False),
    ("Jahn Doe", "2019-01-30T19:49", "Lorem ipsum dolor sit amet,\nconsectetur adipiscing elit. Duis libero.", False),
    ("John-John Doe", "2020-06-10T13:55", "Lorem ipsum : dolor sit amet.", False),
    ("", "2020-06-19T22:08", '+12 345 578 created group "Groupname"', True),
    ("", "2020-06-30T07:10", "You were added", True),
    ("John Doe 🤓", "2021-12-10T09:10", "Lorem ipsum 🤓", False),
    ("🤓", "2021-12-20T11:10", "Lorem ipsum 🤓", False),
    ("John Doe", "2021-12-30T21:01", "Lorem ipsum dolor sit amet,\nconsectetur adipiscing elit. Duis libero.", False),
]


@pytest.mark.parametrize("name", WHATSAPP_FILES)
def test_whatsapp_fixture(chat_miner_dir, name):
    path = chat_miner_dir / "whatsapp" / name
    assert detect(path) == "whatsapp"
    conversation, messages = _one(path, tz="Europe/Berlin")
    got = [(m.author, m.timestamp, m.text, m.system) for m in messages]
    assert got == [(a, _utc(t), text, s) for a, t, text, s in WHATSAPP_EXPECTED]
    assert all(m.tz == "Europe/Berlin" and m.tz_source == "--tz" and m.reply_to is None for m in messages)
    assert conversation.participants == ("John Doe", "Jahn Doe", "John-John Doe", "John Doe 🤓", "🤓")
    assert (conversation.tz, conversation.tz_source, conversation.source_format) == (
        "Europe/Berlin",
        "--tz",
        "whatsapp",
    )
    assert len({m.local_id for m in messages}) == 9
    target = json.loads((chat_miner_dir / "whatsapp" / "target.json").read_text(encoding="utf-8"))
    assert {t["author"] for t in target} <= set(conversation.participants)


def test_whatsapp_fixtures_give_the_same_ids_whatever_the_date_layout(chat_miner_dir):
    ids = [
        [m.local_id for m in _one(chat_miner_dir / "whatsapp" / name, tz="Europe/Berlin")[1]] for name in WHATSAPP_FILES
    ]
    assert all(i == ids[0] for i in ids)


def test_signal_text_fixture(chat_miner_dir):
    path = chat_miner_dir / "signal" / "test_export.txt"
    assert detect(path) == "signal"
    conversation, messages = _one(path, tz="Europe/Berlin")
    assert [(m.author, m.timestamp, m.text) for m in messages] == [
        ("Jane Doe", _utc("2019-12-24T11:23"), "Hello John!"),
        ("John Doe", _utc("2020-01-17T20:49"), "Hello\nJane!"),
    ]
    assert not any(m.system or m.reply_to for m in messages)
    assert conversation.key == "signal_test_export"


@pytest.mark.parametrize("name", ["test_single_export.json", "test_batch_export.json"])
def test_telegram_fixtures(chat_miner_dir, name):
    path = chat_miner_dir / "telegram" / name
    assert detect(path) == "telegram"
    conversation, messages = _one(path)  # date_unixtime: no zone needed
    assert [(m.author, m.timestamp, m.text, m.tz_source) for m in messages] == [
        ("Author 1", _utc("2018-12-05T10:39:10"), "Minimal Message", "file"),
        ("Author 2", _utc("2018-12-05T10:49:24"), "Link:https://telegram.org/", "file"),
    ]
    assert not any(m.system or m.reply_to or m.edited for m in messages)
    assert conversation.participants == ("Author 1", "Author 2")
    expected_title = "Chatname" if "batch" in name else "test_single_export"
    assert conversation.title == expected_title


def test_instagram_fixture(chat_miner_dir):
    path = chat_miner_dir / "instagram" / "test_export.json"
    assert detect(path) == "messenger"
    conversation, messages = _one(path)
    assert [(m.author, m.timestamp, m.text) for m in messages] == [
        ("Jane Doe", _utc("2019-12-24T11:23"), "Hello John!"),
        ("John Doe", _utc("2020-01-17T20:49"), "Hello Jane!"),
    ]
    assert all(m.tz == "UTC" and m.tz_source == "file" for m in messages)
    target = json.loads((chat_miner_dir / "instagram" / "target.json").read_text(encoding="utf-8"))
    assert len(target) == len(messages)
