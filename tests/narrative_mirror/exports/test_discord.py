"""DiscordChatExporter JSON: replies by reference, bots, edits, system types, offsets, errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from narrative_mirror.exports import Attachment, ExportFormatError, Reaction, detect, read_export


def _message(id_, kind, when, name, content, **extra):
    author = {"id": f"a{name}", "name": name.lower(), "nickname": name, "isBot": extra.pop("bot", False)}
    return {
        "id": id_,
        "type": kind,
        "timestamp": when,
        "timestampEdited": extra.pop("edited", None),
        "isPinned": False,
        "content": content,
        "author": author,
        "attachments": extra.pop("attachments", []),
        "embeds": [],
        "stickers": extra.pop("stickers", []),
        "reactions": [],
        "mentions": [],
        **extra,
    }


EXPORT = {
    "guild": {"id": "1", "name": "Makers"},
    "channel": {
        "id": "55",
        "type": "GuildPublicThread",
        "categoryId": "50",
        "category": "projects",
        "name": "robot arm",
    },
    "messages": [
        _message("100", "GuildMemberJoin", "2024-02-01T09:00:00+01:00", "Ann", ""),
        _message(
            "101",
            "Default",
            "2024-02-01T09:01:00.500+01:00",
            "Ann",
            "servo arrived",
            attachments=[{"id": "9", "url": "https://cdn/x/servo.jpg", "fileName": "servo.jpg", "fileSizeBytes": 10}],
        ),
        _message(
            "102",
            "Reply",
            "2024-02-01T09:02:00+01:00",
            "Bob",
            "nice!",
            edited="2024-02-01T09:03:00+01:00",
            reference={"messageId": "101", "channelId": "55", "guildId": "1"},
        ),
        _message(
            "103",
            "Default",
            "2024-02-01T08:05:00+00:00",
            "Helper",
            "reminder set",
            bot=True,
            stickers=[{"id": "3", "name": "wave", "format": "Png"}],
        ),
        _message(
            "104",
            "ChannelPinnedMessage",
            "2024-02-01T09:06:00+01:00",
            "Ann",
            "",
            reference={"messageId": "101", "channelId": "55"},
        ),
        _message(
            "105",
            "Reply",
            "2024-02-01T09:07:00+01:00",
            "Bob",
            "from elsewhere",
            reference={"messageId": "999", "channelId": "77"},
        ),
    ],
    "messageCount": 6,
}


def _read(path, **kwargs):
    [conversation] = list(read_export(path, **kwargs))
    return conversation, list(conversation.messages())


def test_replies_bots_edits_and_system_types(tmp_path):
    path = tmp_path / "Makers - projects - robot arm [55].json"
    path.write_text(json.dumps(EXPORT), encoding="utf-8")
    assert detect(path) == "discord"
    conversation, messages = _read(path)
    assert (conversation.key, conversation.title) == ("discord_robot_arm", "Makers / projects / robot arm")
    assert (conversation.tz, conversation.tz_source) == ("UTC+01:00", "file")
    assert [(m.local_id, m.author, m.text, m.system, m.bot, m.reply_to, m.edited) for m in messages] == [
        ("100", "Ann", "Ann joined the server", True, False, None, False),
        ("101", "Ann", "servo arrived", False, False, None, False),
        ("102", "Bob", "nice!", False, False, "101", True),
        ("103", "Helper", "reminder set", False, True, None, False),
        ("104", "Ann", 'Ann pinned a message: "servo arrived"', True, False, "101", False),
        ("105", "Bob", "from elsewhere", False, False, None, False),
    ]
    assert messages[1].timestamp == datetime(2024, 2, 1, 8, 1, 0, 500000, tzinfo=UTC)
    assert [m.tz for m in messages[2:4]] == ["UTC+01:00", "UTC"]
    assert messages[1].attachments == (Attachment("photo", "servo.jpg", None),)
    assert messages[3].attachments == (Attachment("sticker", "wave", None),)
    assert conversation.participants == ("Ann", "Bob")  # the bot writes, but is not one of the people


def test_system_lines_name_who_did_it(tmp_path):
    """The transcript shows a system line without its author, so the line itself names them:
    DiscordChatExporter's ``Joined the server.`` (or no content at all) by quinn."""
    export = json.loads(json.dumps(EXPORT))
    export["messages"] = [
        _message("1", "GuildMemberJoin", "2024-02-01T09:00:00+01:00", "quinn", "Joined the server."),
        _message("2", "Call", "2024-02-01T09:01:00+01:00", "Ann", "Started a call that lasted 3 minutes."),
        _message("3", "ChannelPinnedMessage", "2024-02-01T09:02:00+01:00", "Ann", "Ann pinned a message."),
        _message("4", "GuildBoost", "2024-02-01T09:03:00+01:00", "Bob", ""),
    ]
    path = tmp_path / "c.json"
    path.write_text(json.dumps(export), encoding="utf-8")
    assert [m.text for m in _read(path)[1]] == [
        "quinn joined the server.",
        "Ann started a call that lasted 3 minutes.",
        "Ann pinned a message.",
        "Bob guild boost",
    ]


def test_a_bad_message_is_one_warning_naming_the_json_path_and_the_rest_is_read(tmp_path):
    path = tmp_path / "c.json"
    broken = json.loads(json.dumps(EXPORT))
    del broken["messages"][2]["author"]
    broken["messages"][3]["timestamp"] = "2024-02-01 09:00"
    path.write_text(json.dumps(broken), encoding="utf-8")
    conversation, messages = _read(path, format="discord")
    assert [m.local_id for m in messages] == ["100", "101", "104", "105"]
    assert conversation.warnings == [
        f"{path}: messages[2].author: missing (message id 102 left out; the rest of the channel is read)",
        f"{path}: messages[3].timestamp: timestamp '2024-02-01 09:00' has no offset (message id 103 left out;"
        " the rest of the channel is read)",
    ]
    for item in broken["messages"]:
        item.pop("author", None)
    path.write_text(json.dumps(broken), encoding="utf-8")
    with pytest.raises(
        ExportFormatError, match=r"c.json: messages\[0\]\.author: missing"
    ):  # no message read: not a chat
        _read(path, format="discord")
    path.write_text(json.dumps(EXPORT)[:200], encoding="utf-8")
    with pytest.raises(ExportFormatError, match=r"c.json: line 1: invalid JSON at column \d+"):
        _read(path, format="discord")

    broken = json.loads(json.dumps(EXPORT))
    broken["messages"][1]["attachments"] = 3
    path.write_text(json.dumps(broken), encoding="utf-8")
    conversation, messages = _read(path, format="discord")
    assert len(messages) == 5 and conversation.warnings == [
        f"{path}: messages[1].attachments: expected list, found 3 (message id 101 left out; the rest of the channel"
        " is read)"
    ]


def test_a_chat_across_a_clock_change_is_labelled_with_the_zone_that_explains_its_offsets(tmp_path):
    from narrative_mirror.exports.folder import ImportOptions, find_folder_chats
    from narrative_mirror.exports.frames import load_export_chat

    export = {
        "guild": {"id": "1", "name": "Astro"},
        "channel": {"id": "56", "type": "GuildTextChat", "category": "events", "name": "trip planning"},
        "messages": [
            _message(
                "200", "Default", "2025-03-28T19:45:00+00:00", "Hazel", "meet at 7:45, before the clocks go forward"
            ),
            _message("201", "Default", "2025-03-30T10:00:00+01:00", "Ollie", "everyone back safe"),
        ],
    }
    folder = tmp_path / "chats"
    folder.mkdir()
    (folder / "Astro - events - trip planning [56].json").write_text(json.dumps(export), encoding="utf-8")

    def zone_label(tz):
        options = ImportOptions(tz=tz, machine_tz="UTC")
        [source] = find_folder_chats(folder, options)[0].values()
        return load_export_chat(source, options).tz

    # the winter half's "UTC" was the label before; London explains both offsets
    assert zone_label("Europe/London") == "Europe/London"
    assert zone_label(None) == "UTC / UTC+01:00"  # no zone given: the offsets the file records
    assert zone_label("Europe/Berlin") == "UTC / UTC+01:00"  # a zone that does not explain them is not used


def test_a_bot_message_with_only_an_embed_is_read_from_the_embed(tmp_path):
    # A scheduling bot posts an event card: no content, the plan in its embed. A person's message
    # with a link keeps its own words (the embed is the link's preview).
    card = {
        "title": "Charity Tourney starts tomorrow",
        "description": "**When:** Sunday, 30 March 2025 10:00 AM (GMT)\n**Where:** Powerleague Shoreditch",
        "fields": [{"name": "Going", "value": "9"}],
        "footer": {"text": "sesh | event reminder"},
    }
    preview = {
        "title": "Powerleague Shoreditch",
        "url": "https://powerleague.com/shoreditch",
        "description": "5-a-side pitches in east London",
    }
    export = {
        **EXPORT,
        "messages": [
            {**_message("1", "Default", "2025-03-29T10:00:00+00:00", "sesh", "", bot=True), "embeds": [card]},
            {
                **_message("2", "Default", "2025-03-29T10:01:00+00:00", "Ann", "https://powerleague.com/shoreditch"),
                "embeds": [preview],
            },
        ],
    }
    path = tmp_path / "tourney.json"
    path.write_text(json.dumps(export), encoding="utf-8")
    _, messages = _read(path)
    assert [m.text for m in messages] == [
        "Charity Tourney starts tomorrow\nWhen: Sunday, 30 March 2025 10:00 AM (GMT)\nWhere: Powerleague Shoreditch\n"
        "Going: 9\nsesh | event reminder",
        "https://powerleague.com/shoreditch",
    ]
    assert messages[0].bot and not messages[0].system
    # The preview is kept beside the words: a question about the pitches finds Ann's link.
    assert messages[1].attachments == (
        Attachment(
            "link", "https://powerleague.com/shoreditch", "Powerleague Shoreditch: 5-a-side pitches in east London"
        ),
    )


def _pins_export(*messages):
    channel = {"id": "1301948837416210472", "type": "GuildTextChat", "category": "EVENTS", "name": "lan-planning"}
    return {
        "guild": {"id": "1087418011337867264", "name": "Lag Lords"},
        "channel": channel,
        "messages": list(messages),
        "messageCount": len(messages),
    }


def _pin(id_, when, name, pinned_id):
    reference = {"messageId": pinned_id, "channelId": "1301948837416210472", "guildId": "1087418011337867264"}
    return _message(id_, "ChannelPinnedMessage", when, name, "Pinned a message.", reference=reference)


def _lines(tmp_path, export):
    path = tmp_path / "Lag Lords - EVENTS - lan-planning [1301948837416210472].json"
    path.write_text(json.dumps(export), encoding="utf-8")
    return [(m.local_id, m.text, m.reply_to, m.system) for m in _read(path)[1]]


def test_a_pin_line_quotes_the_pinned_message_and_replies_to_it(tmp_path):
    plan = "LAN is at Kez's garage,\n\n  doors 6pm   bring your own   extension lead"
    export = _pins_export(
        _message("1304373700012345678", "Default", "2024-11-08T09:15:20.104+00:00", "Kez", plan),
        _message("1304373801198765432", "Default", "2024-11-08T09:15:44.512+00:00", "Mo", "🔥"),
        _pin("1304373928968974380", "2024-11-08T09:16:18.761+00:00", "Kez", "1304373700012345678"),
    )
    assert _lines(tmp_path, export)[2] == (
        "1304373928968974380",
        'Kez pinned a message: "LAN is at Kez\'s garage, doors 6pm bring your own extension lead"',
        "1304373700012345678",
        True,
    )


def test_a_pin_of_a_message_not_in_the_file_says_only_that_a_message_was_pinned(tmp_path):
    # Exported with --after: the first pin is of a message from before the range, the second of
    # one in it; each line stays with its own message.
    export = _pins_export(
        _pin("1304373928968974380", "2024-11-08T09:16:18.761+00:00", "Kez", "1290000000000000001"),
        _message("1304374000000000001", "Default", "2024-11-08T09:17:02.000+00:00", "Mo", "which one?"),
        _message("1304374100000000002", "Default", "2024-11-08T09:18:40.250+00:00", "Kez", "the old rota, now this"),
        _pin("1304374200000000003", "2024-11-08T09:19:05.900+00:00", "Kez", "1304374100000000002"),
    )
    assert _lines(tmp_path, export) == [
        ("1304373928968974380", "Kez pinned a message.", None, True),
        ("1304374000000000001", "which one?", None, False),
        ("1304374100000000002", "the old rota, now this", None, False),
        ("1304374200000000003", 'Kez pinned a message: "the old rota, now this"', "1304374100000000002", True),
    ]


def test_a_long_pinned_message_is_shortened_in_the_pin_line(tmp_path):
    rules = (
        "House rules for the weekend: no drinks on the desks, label your power bricks, the hut "
        "costs £31 each (six of us) and it's due to me by Friday 15th."
    )
    export = _pins_export(
        _message("1304370000000000001", "Default", "2024-11-08T08:58:10.000+00:00", "Kez", rules),
        _pin("1304373928968974380", "2024-11-08T09:16:18.761+00:00", "Kez", "1304370000000000001"),
    )
    local_id, text, reply_to, _ = _lines(tmp_path, export)[1]
    quoted = 'Kez pinned a message: "House rules for the weekend: no drinks on the desks, label your power bricks, t…"'
    assert (local_id, text, reply_to) == ("1304373928968974380", quoted, "1304370000000000001")
    assert len(text.split(": ", 1)[1].strip('"')) <= 80


def test_reactions_name_who_reacted_by_their_server_nickname(tmp_path):
    darren = {"id": "29", "name": "dazzler_88", "nickname": "Darren", "isBot": False}
    reactions = [
        {"emoji": {"id": "", "name": "🙌", "code": "raised_hands"}, "count": 2, "users": [darren, {"name": "kez"}]},
        {"emoji": {"id": "1187", "name": "pog", "isAnimated": False}, "count": 4},  # a server's own emoji
        {"emoji": {"id": "", "name": ""}, "count": 1},  # nothing to show: left out
    ]
    export = {
        **EXPORT,
        "messages": [
            {**_message("1", "Default", "2025-03-29T10:00:00+00:00", "Ann", "We won!"), "reactions": reactions}
        ],
    }
    path = tmp_path / "tourney.json"
    path.write_text(json.dumps(export), encoding="utf-8")
    [message] = _read(path)[1]
    assert message.reactions == (Reaction("🙌", ("Darren", "kez"), 2), Reaction(":pog:", (), 4))
