"""Signal exports: signal-export data.json (quotes resolved by text) and the text layout."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from narrative_mirror.exports import Attachment, ExportFormatError, Reaction, detect, read_export


def _rows(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    return path


ROWS = [
    {"date": "2024-06-01 10:00:00", "sender": "Ann", "body": "ok", "quote": "", "attachments": []},
    {"date": "2024-06-01 10:01:00", "sender": "Bob", "body": "dinner at 8?", "quote": ""},
    {"date": "2024-06-01 10:02:00", "sender": "Cy", "body": "ok", "quote": ""},
    {"date": "2024-06-01 10:03:00", "sender": "Ann", "body": "yes!", "quote": "dinner at 8?"},
    {"date": "2024-06-01 10:04:00", "sender": "Bob", "body": "which one?", "quote": "ok"},
    {
        "date": "2024-06-01 10:05:00",
        "sender": "Cy",
        "body": "",
        "quote": "gone",
        "attachments": [{"name": "pic.jpg", "path": "media/pic.jpg"}],
    },
]


def test_quotes_resolve_only_to_a_single_earlier_message(tmp_path):
    path = _rows(tmp_path / "Dinner club" / "data.json", ROWS)
    assert detect(path) == "signal"
    [conversation] = list(read_export(path, tz="Europe/Madrid"))
    messages = list(conversation.messages())
    assert (conversation.key, conversation.title, conversation.tz) == (
        "signal_dinner_club",
        "Dinner club",
        "Europe/Madrid",
    )
    assert [m.reply_to for m in messages] == [None, None, None, messages[1].local_id, None, None]
    assert messages[0].timestamp == datetime(2024, 6, 1, 8, tzinfo=UTC)
    assert messages[5].attachments == (Attachment("photo", "pic.jpg", None),)
    assert conversation.participants == ("Ann", "Bob", "Cy")


def test_text_layout_continuations_and_errors(tmp_path):
    path = tmp_path / "chat.txt"
    path.write_text("[2024-06-01, 10:00] Ann: line one\nline two\n[2024-06-01, 10:01] Bob: hi\n", encoding="utf-8")
    [conversation] = list(read_export(path, tz="UTC"))
    assert [(m.author, m.text) for m in conversation.messages()] == [("Ann", "line one\nline two"), ("Bob", "hi")]
    path.write_text("[2024-06-01, 10:00] Ann: a\n[2024-13-01, 10:01] Bob: b\n", encoding="utf-8")
    [conversation] = list(read_export(path, tz="UTC"))
    assert [m.text for m in conversation.messages()] == ["a"]
    assert conversation.warnings == [
        f"{path}: line 2: bad date '2024-13-01 10:01' (message line 2 left out; the rest of the chat is read)"
    ]
    path.write_text("[2024-13-01, 10:01] Bob: b\n", encoding="utf-8")
    with pytest.raises(ExportFormatError, match=r"chat.txt: line 1: bad date '2024-13-01 10:01'"):
        list(read_export(path, tz="UTC"))
    bad = _rows(tmp_path / "x" / "data.json", [ROWS[0], {"date": "2024-06-01 10:00:00", "body": "no sender"}])
    [conversation] = list(read_export(bad, format="signal", tz="UTC"))
    assert [m.text for m in conversation.messages()] == ["ok"]
    assert conversation.warnings == [
        f"{bad}: line 2.sender: missing (message line 2 left out; the rest of the chat is read)"
    ]
    bad = _rows(tmp_path / "y" / "data.json", [{"date": "soon", "sender": "Ann", "body": "x"}])
    with pytest.raises(ExportFormatError, match=r"data.json: line 1\.date: bad date 'soon'"):
        list(read_export(bad, format="signal", tz="UTC"))


def test_signal_export_padding_markdown_quotes_stickers_and_group_updates(tmp_path):
    # As signal-export writes data.json: two spaces after every body, a quote as markdown, a
    # sticker as its emoji, a group update as a row with nothing in it.
    rows = [
        {"date": "2026-03-01 18:00", "sender": "Ann", "body": "who's bringing the speaker?  ", "quote": ""},
        {
            "date": "2026-03-01 18:05",
            "sender": "Bob",
            "body": "me, it's charged  ",
            "quote": "\n\n> who's bringing the speaker?\n\n",
        },
        {"date": "2026-03-01 18:06", "sender": "Cy", "body": "  ", "quote": "", "sticker": "👍"},
        {"date": "2026-03-01 18:07", "sender": "Jules", "body": "  ", "quote": "", "attachments": []},
        {"date": "2026-03-01 18:08", "sender": "Ann", "body": "two\nlines  ", "quote": "\n\n> me, it's charged\n\n"},
        # the newer layout keeps the sticker as an object
        {
            "date": "2026-03-01 18:09",
            "sender": "Cy",
            "body": "  ",
            "sticker": {"id": "14", "packId": "9a", "emoji": "🎉"},
        },
    ]
    [conversation] = list(read_export(_rows(tmp_path / "Party" / "data.json", rows), tz="Europe/London"))
    messages = list(conversation.messages())
    assert [(m.author, m.text, m.system) for m in messages] == [
        ("Ann", "who's bringing the speaker?", False),
        ("Bob", "me, it's charged", False),
        ("Cy", "", False),
        ("Jules", "", True),
        ("Ann", "two\nlines", False),
        ("Cy", "", False),
    ]
    assert [m.reply_to for m in messages] == [None, messages[0].local_id, None, None, messages[1].local_id, None]
    assert messages[2].attachments == (Attachment("sticker", "", "👍"),)
    assert messages[5].attachments == (Attachment("sticker", "", "🎉"),)


def test_calls_are_system_lines_and_the_repeated_hour_keeps_the_sending_order(tmp_path):
    # signal-export writes a call as a row of text; on 25 Oct 2026 London's clocks go back at 02:00,
    # so 01:00-01:59 happens twice: the 01:12 after 01:37 (a reply to it) is in the second pass.
    rows = [
        {"date": "2026-10-13 20:31:12", "sender": "Me", "body": "Outgoing voice call (accepted, 18m 5s)  "},
        {"date": "2026-10-19 19:40:11", "sender": "Rhi", "body": "Missed voice call  "},
        {"date": "2026-10-19 19:41:00", "sender": "Rhi", "body": "Missed voice call, ring me back  "},
        {"date": "2026-10-25 01:37:00", "sender": "Rhi", "body": "still up?  "},
        {"date": "2026-10-25 01:12:44", "sender": "Me", "body": "yes  ", "quote": "> still up?"},
        {"date": "2026-10-25 09:00:00", "sender": "Rhi", "body": "morning  "},
    ]
    [conversation] = list(read_export(_rows(tmp_path / "Rhi" / "data.json", rows), tz="Europe/London"))
    messages = list(conversation.messages())
    assert [m.system for m in messages] == [True, True, False, False, False, False]
    times = [m.timestamp for m in messages[3:]]
    assert times == [
        datetime(2026, 10, 25, 0, 37, tzinfo=UTC),  # BST, first pass
        datetime(2026, 10, 25, 1, 12, 44, tzinfo=UTC),  # GMT, second pass: after the message it answers
        datetime(2026, 10, 25, 9, 0, tzinfo=UTC),
    ]
    assert messages[4].reply_to == messages[3].local_id


def test_reactions_and_deleted_messages_as_signal_export_writes_them(tmp_path):
    # data.json: reactions as [name, emoji] pairs, a deleted message with no body left.
    rows = [
        {
            "date": "2026-03-01 18:00",
            "sender": "Rob Hartley",
            "body": "Concert is sold out!  ",
            "reactions": [["Dev Mistry", "😂"], ["Me", "🎉"], ["Marguerite Doyle", "😂"], "damaged"],
        },
        {"date": "2026-03-01 18:01", "sender": "Dev Mistry", "body": "", "deleted": True},
    ]
    [conversation] = list(read_export(_rows(tmp_path / "Choir" / "data.json", rows), tz="Europe/London"))
    sold_out, deleted = conversation.messages()
    assert sold_out.reactions == (Reaction("😂", ("Dev Mistry", "Marguerite Doyle"), 2), Reaction("🎉", ("Me",), 1))
    assert (deleted.author, deleted.text, deleted.system) == ("Dev Mistry", "This message was deleted", True)
    # The text layout: the reactions are a line of their own after the words.
    path = tmp_path / "chat.txt"
    path.write_text(
        "[2026-03-01, 18:00] Rob Hartley: Concert is\nsold out!\n(- Dev Mistry: 😂, Me: 🎉 -)\n"
        "[2026-03-01, 18:01] Dev Mistry: (- not a reaction line -)\n",
        encoding="utf-8",
    )
    [conversation] = list(read_export(path, tz="UTC"))
    sold_out, other = conversation.messages()
    assert (sold_out.text, sold_out.reactions) == (
        "Concert is\nsold out!",
        (Reaction("😂", ("Dev Mistry",), 1), Reaction("🎉", ("Me",), 1)),
    )
    assert (other.text, other.reactions) == ("(- not a reaction line -)", ())
