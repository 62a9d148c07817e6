"""Messenger/Instagram JSON: mojibake repair, newest-first files, inbox trees, zips, errors."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime

import pytest

from narrative_mirror.exports import Attachment, ExportFormatError, Reaction, detect, read_export


def _escaped(text):
    return text.encode("utf-8").decode("latin-1")


def _write_thread(folder, files):
    folder.mkdir(parents=True)
    for number, messages in enumerate(files, start=1):
        data = {
            "participants": [{"name": _escaped("Zoë")}, {"name": "Max"}],
            "messages": messages,
            "title": _escaped("Zoë & Max 💬"),
            "thread_path": f"inbox/{folder.name}",
        }
        (folder / f"message_{number}.json").write_text(json.dumps(data, ensure_ascii=True), encoding="ascii")


NEWEST = [
    {
        "sender_name": "Max",
        "timestamp_ms": 1700000300000,
        "content": _escaped("très bien 👍"),
        "photos": [{"uri": "messages/inbox/zoemax_1/photos/p1.jpg", "creation_timestamp": 1700000300}],
    },
    {"sender_name": _escaped("Zoë"), "timestamp_ms": 1700000200000, "content": "ça va?", "is_unsent": False},
    {"sender_name": "Max", "timestamp_ms": 1700000150000, "is_unsent": True},
]
OLDEST = [
    {
        "sender_name": "Max",
        "timestamp_ms": 1700000100000,
        "content": "salut",
        "share": {"link": "https://example.org", "share_text": "look"},
    },
    {
        "sender_name": _escaped("Zoë"),
        "timestamp_ms": 1700000000000,
        "content": _escaped("Zoë added Max"),
        "type": "Subscribe",
    },
]


def test_thread_files_mojibake_and_ordering(tmp_path):
    folder = tmp_path / "inbox" / "zoemax_1"
    _write_thread(folder, [NEWEST, OLDEST])
    assert detect(folder / "message_1.json") == "messenger"
    [conversation] = list(read_export(folder / "message_1.json"))
    messages = list(conversation.messages())
    assert (conversation.key, conversation.title) == ("messenger_zoe_max", "Zoë & Max 💬")
    assert conversation.participants == ("Zoë", "Max")
    assert [(m.author, m.timestamp, m.text, m.system) for m in messages] == [
        ("Zoë", datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC), "Zoë added Max", True),
        ("Max", datetime(2023, 11, 14, 22, 15, tzinfo=UTC), "salut", False),
        # Unsent: kept as the line Messenger shows, as a deleted WhatsApp message is.
        ("Max", datetime(2023, 11, 14, 22, 15, 50, tzinfo=UTC), "Max unsent a message", True),
        ("Zoë", datetime(2023, 11, 14, 22, 16, 40, tzinfo=UTC), "ça va?", False),
        ("Max", datetime(2023, 11, 14, 22, 18, 20, tzinfo=UTC), "très bien 👍", False),
    ]
    assert messages[1].attachments == (Attachment("link", "https://example.org", "look"),)
    assert messages[4].attachments == (Attachment("photo", "p1.jpg", None),)
    assert all(m.reply_to is None and m.tz_source == "file" for m in messages)


def test_inbox_tree_and_zip_yield_one_conversation_per_thread(tmp_path):
    root = tmp_path / "facebook" / "your_activity_across_facebook" / "messages"
    _write_thread(root / "inbox" / "zoemax_1", [NEWEST, OLDEST])
    _write_thread(root / "archived_threads" / "old_2", [OLDEST])
    progress = []
    conversations = list(read_export(tmp_path / "facebook", on_progress=lambda *p: progress.append(p)))
    # Both threads are named "Zoë & Max 💬": one key at the reader, set apart by their thread ids.
    assert [(c.key, c.native_id) for c in conversations] == [
        ("messenger_zoe_max", "old_2"),
        ("messenger_zoe_max", "zoemax_1"),
    ]
    assert [p[:2] for p in progress] == [(1, 2), (2, 2)]
    archive = shutil.make_archive(str(tmp_path / "dyi"), "zip", root_dir=tmp_path / "facebook")
    assert detect(archive) == "messenger"
    zipped = [(c.key, [m.text for m in c.messages()]) for c in read_export(archive)]
    assert zipped == [(c.key, [m.text for m in c.messages()]) for c in conversations]


def test_a_bad_message_is_one_warning_and_the_rest_of_the_thread_is_read(tmp_path):
    folder = tmp_path / "t_1"
    _write_thread(
        folder,
        [
            [
                {"sender_name": "Max", "timestamp_ms": 1700000000000, "content": "hi"},
                {"timestamp_ms": 1700000100000, "content": "who?"},
                {"sender_name": "Max", "timestamp_ms": "soon", "content": "when?"},
            ]
        ],
    )
    [conversation] = list(read_export(folder, format="messenger"))
    assert [m.text for m in conversation.messages()] == ["hi"]
    label = folder / "message_1.json"
    assert conversation.warnings == [  # a Messenger file lists the newest message first
        f"{label}: messages[2].timestamp_ms: expected int, found 'soon' (message messages[2] left out; the rest of"
        " the chat is read)",
        f"{label}: messages[1].sender_name: missing (message messages[1] left out; the rest of the chat is read)",
    ]


def test_missing_sender_and_bad_json_name_file_and_path(tmp_path):
    folder = tmp_path / "t_1"
    _write_thread(folder, [[{"timestamp_ms": 1, "content": "x"}]])
    with pytest.raises(ExportFormatError, match=r"t_1/message_1.json: messages\[0\]\.sender_name: missing"):
        list(read_export(folder, format="messenger"))
    (folder / "message_1.json").write_text('{"messages": [', encoding="utf-8")
    with pytest.raises(ExportFormatError, match=r"t_1/message_1.json: line 1: invalid JSON"):
        list(read_export(folder, format="messenger"))


def test_a_group_action_written_as_an_ordinary_message_is_a_system_line(tmp_path):
    """Messenger stores "Zoë named the group ..." as a "Generic" message with the sender's name first:
    a line about the sender, not said by them (a name read from it answered "What is the dog's name?")."""
    lines = [
        ("Zoë", "Zoë named the group Whitby cousins 🌊."),
        ("Zoë", "Zoë changed the group photo."),
        ("Max", "Max added Zoë to the group."),
        ("Max", "Max left the group."),
        ("Max", "Zoë named the group, not me"),  # another sender: said by Max
        ("Zoë", "I named the group after the beach"),
        ("Max", "The audio call ended."),  # a call's end carries its length
    ]
    messages = [
        {"sender_name": _escaped(who), "timestamp_ms": 1700000000000 + i * 1000, "content": _escaped(text)}
        for i, (who, text) in enumerate(lines)
    ]
    messages[-1]["call_duration"] = 1268
    messages = messages[::-1]
    folder = tmp_path / "inbox" / "zoemax_1"
    _write_thread(folder, [messages])
    [conversation] = list(read_export(folder / "message_1.json"))
    assert [(m.text, m.system) for m in conversation.messages()] == [
        (text, i < 4 or i == 6) for i, (_, text) in enumerate(lines)
    ]


def test_an_instagram_download_keys_its_chats_as_instagram(tmp_path):
    # Instagram writes Messenger's files; only its download's folders name the app.
    _write_thread(tmp_path / "your_instagram_activity" / "messages" / "inbox" / "zoemax_1", [NEWEST, OLDEST])
    [conversation] = list(read_export(tmp_path / "your_instagram_activity"))
    assert conversation.key == "instagram_zoe_max" and conversation.source_format == "messenger"
    assert [m.text for m in conversation.messages()][-1] == "très bien 👍"


def test_instagram_reaction_notices_are_system_lines(tmp_path):
    thread = [
        {"sender_name": "Max", "timestamp_ms": 1700000300000, "content": _escaped("Reacted 😂 to your message ")},
        {"sender_name": "Max", "timestamp_ms": 1700000200000, "content": "Liked a message"},
        {"sender_name": "Max", "timestamp_ms": 1700000100000, "content": "Liked a message about the gazebo, nice"},
    ]
    _write_thread(tmp_path / "your_instagram_activity" / "messages" / "inbox" / "zoemax_1", [thread])
    [conversation] = list(read_export(tmp_path / "your_instagram_activity"))
    assert [m.system for m in conversation.messages()] == [False, True, True]


def test_reactions_are_grouped_by_emoji_with_who_reacted(tmp_path):
    folder = tmp_path / "inbox" / "zoemax_1"
    reactions = [
        {"reaction": _escaped("😢"), "actor": _escaped("Zoë")},
        {"reaction": _escaped("❤"), "actor": "Max"},
        {"reaction": _escaped("😢"), "actor": "Max"},
    ]
    _write_thread(
        folder,
        [[{"sender_name": "Max", "timestamp_ms": 1700000300000, "content": "the cat died", "reactions": reactions}]],
    )
    [conversation] = list(read_export(folder / "message_1.json"))
    [message] = conversation.messages()
    assert message.reactions == (Reaction("😢", ("Zoë", "Max"), 2), Reaction("❤", ("Max",), 1))
    # A damaged reactions field costs the reactions, never the message.
    folder = tmp_path / "inbox" / "maxzoe_2"
    _write_thread(folder, [[{"sender_name": "Max", "timestamp_ms": 1700000300000, "content": "hi", "reactions": "?"}]])
    [conversation] = list(read_export(folder / "message_1.json"))
    assert [(m.text, m.reactions) for m in conversation.messages()] == [("hi", ())] and not conversation.warnings
