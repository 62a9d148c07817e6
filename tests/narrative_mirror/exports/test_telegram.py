"""Telegram Desktop result.json: entities, service messages, replies, edits, full exports, errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from narrative_mirror.exports import Attachment, ExportFormatError, detect, read_export

CHAT = {
    "name": "Hiking 🏔",
    "type": "private_supergroup",
    "id": 1234567,
    "messages": [
        {
            "id": 1,
            "type": "service",
            "date": "2024-05-01T10:00:00",
            "date_unixtime": "1714550400",
            "actor": "Ann",
            "actor_id": "user1",
            "action": "create_group",
            "title": "Hiking 🏔",
            "text": "",
            "text_entities": [],
        },
        {
            "id": 2,
            "type": "message",
            "date": "2024-05-01T10:01:00",
            "date_unixtime": "1714550460",
            "from": "Ann",
            "from_id": "user1",
            "text": [
                "See ",
                {"type": "bold", "text": "this"},
                " route: ",
                {"type": "link", "text": "https://example.org/r"},
                "!",
            ],
        },
        {
            "id": 3,
            "type": "message",
            "date": "2024-05-01T10:05:00",
            "date_unixtime": "1714550700",
            "edited": "2024-05-01T10:06:00",
            "edited_unixtime": "1714550760",
            "from": "Bob",
            "from_id": "user2",
            "reply_to_message_id": 2,
            "text": "looks steep",
            "photo": "photos/photo_1@01-05-2024_10-05-00.jpg",
        },
        {
            "id": 4,
            "type": "message",
            "date": "2024-05-01T10:07:00",
            "date_unixtime": "1714550820",
            "from": None,
            "from_id": "user3",
            "forwarded_from": "Cy",
            "text": "",
            "file": "voice_messages/audio_1.ogg",
            "media_type": "voice_message",
            "mime_type": "audio/ogg",
        },
        {
            "id": 5,
            "type": "service",
            "date": "2024-05-01T10:08:00",
            "date_unixtime": "1714550880",
            "actor": "Ann",
            "actor_id": "user1",
            "action": "invite_members",
            "members": ["Dee", "Eve"],
            "text": "",
        },
    ],
}


def _read(path, **kwargs):
    return [(c, list(c.messages())) for c in read_export(path, **kwargs)]


def test_single_chat_entities_service_replies_edits(tmp_path):
    path = tmp_path / "result.json"
    path.write_text(json.dumps(CHAT, ensure_ascii=False), encoding="utf-8")
    assert detect(path) == "telegram"
    [(conversation, messages)] = _read(path)
    assert (conversation.key, conversation.title) == ("telegram_hiking", "Hiking 🏔")
    assert (conversation.tz, conversation.tz_source) == ("UTC+02:00", "file")
    assert [(m.local_id, m.author, m.text, m.system, m.reply_to, m.edited) for m in messages] == [
        ("1", "Ann", "Ann created the group «Hiking 🏔»", True, None, False),
        ("2", "Ann", "See this route: https://example.org/r!", False, None, False),
        ("3", "Bob", "looks steep", False, "2", True),
        ("4", "user3", "[forwarded from Cy]", False, None, False),
        ("5", "Ann", "Ann added Dee, Eve", True, None, False),
    ]
    assert messages[1].timestamp == datetime(2024, 5, 1, 8, 1, tzinfo=UTC)
    assert messages[2].attachments == (Attachment("photo", "photo_1@01-05-2024_10-05-00.jpg", "looks steep"),)
    assert messages[3].attachments == (Attachment("audio", "audio_1.ogg", "[forwarded from Cy]"),)
    assert conversation.participants == ("Ann", "Bob", "user3")


def test_old_export_without_unixtime_uses_the_given_zone(tmp_path):
    path = tmp_path / "result.json"
    chat = {
        "name": "Old",
        "type": "personal_chat",
        "id": 9,
        "messages": [{"id": 1, "type": "message", "date": "2019-01-01T12:00:00", "from": "Ann", "text": "hi"}],
    }
    path.write_text(json.dumps(chat), encoding="utf-8")
    [(conversation, [message])] = _read(path, tz="Europe/Moscow")
    assert message.timestamp == datetime(2019, 1, 1, 9, tzinfo=UTC)
    assert (message.tz, message.tz_source) == ("Europe/Moscow", "--tz")
    assert (conversation.tz, conversation.tz_source) == ("Europe/Moscow", "--tz")


def test_full_export_yields_every_chat_and_left_chat_with_progress(tmp_path):
    second = {
        "name": "Bob",
        "type": "personal_chat",
        "id": 77,
        "messages": [
            {
                "id": 10,
                "type": "message",
                "date": "2024-01-01T00:00:00",
                "date_unixtime": "1704067200",
                "from": "Bob",
                "text": "yo",
            }
        ],
    }
    left = {"name": "Old group", "type": "private_group", "id": 5, "messages": []}
    export = {
        "about": "Here is the data you requested.",
        "personal_information": {"first_name": "Me"},
        "chats": {"about": "...", "list": [CHAT, second]},
        "left_chats": {"about": "...", "list": [left]},
    }
    path = tmp_path / "result.json"
    path.write_text(json.dumps(export, ensure_ascii=False), encoding="utf-8")
    assert detect(tmp_path) == "telegram"
    progress = []
    conversations = _read(tmp_path, on_progress=lambda done, total, label: progress.append((done, total, label)))
    assert [(c.key, len(m)) for c, m in conversations] == [
        ("telegram_hiking", 5),
        ("telegram_bob", 1),
        ("telegram_old_group", 0),
    ]
    assert progress == [(1, None, "Hiking 🏔"), (2, None, "Bob"), (3, None, "Old group")]


def test_truncated_json_names_the_path(tmp_path):
    path = tmp_path / "result.json"
    text = json.dumps({"about": "x", "chats": {"list": [CHAT, CHAT]}})
    path.write_text(text[: text.rindex('"looks steep"')], encoding="utf-8")
    with pytest.raises(ExportFormatError) as caught:
        [len(m) for _, m in _read(path)]
    assert str(caught.value).startswith(f"{path}: chats.list[1].messages[2].text: invalid JSON")
    single = tmp_path / "single" / "result.json"
    single.parent.mkdir()
    text = json.dumps(CHAT)
    single.write_text(text[:-40], encoding="utf-8")
    with pytest.raises(ExportFormatError, match=r"result.json: messages\[4\]\.\w+: invalid JSON"):
        _read(single)


def test_an_unreadable_message_is_one_warning_naming_its_path_and_the_rest_is_read(tmp_path):
    path = tmp_path / "result.json"
    broken = json.loads(json.dumps(CHAT))
    del broken["messages"][2]["date"], broken["messages"][2]["date_unixtime"]
    broken["messages"][3]["date"] = "yesterday"
    broken["messages"][4]["text"] = ["ok", 5]
    path.write_text(json.dumps(broken), encoding="utf-8")
    [(chat, messages)] = _read(path)
    assert [m.local_id for m in messages] == ["1", "2"]
    assert chat.warnings == [
        f"{path}: messages[2].date: missing (and no date_unixtime) (message id 3 left out; the rest of the chat is read)",
        f"{path}: messages[3].date: bad date 'yesterday' (message id 4 left out; the rest of the chat is read)",
        f"{path}: messages[4].text[1]: expected a string or an entity with text, found 5 "
        "(message id 5 left out; the rest of the chat is read)",
    ]


def test_a_missing_zone_or_messages_array_fails_the_chat(tmp_path):
    path = tmp_path / "result.json"
    path.write_text(
        json.dumps(
            {
                "name": "Old",
                "id": 9,
                "messages": [{"id": 1, "type": "message", "date": "2019-01-01T12:00:00", "from": "Ann", "text": "hi"}],
            }
        ),
        encoding="utf-8",
    )
    with pytest.raises(ExportFormatError, match=r"result.json: the export has local times without a zone"):
        _read(path, format="telegram")
    path.write_text(json.dumps({"name": "x", "type": "personal_chat", "id": 1}), encoding="utf-8")
    with pytest.raises(ExportFormatError, match=r"result.json: \$\.messages: missing"):
        _read(path, format="telegram")
