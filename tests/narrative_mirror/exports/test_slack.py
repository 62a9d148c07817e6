"""Slack exports (folder and zip): threads, mrkdwn, subtypes, bots, files, lazy day files, errors."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime

import pytest

from narrative_mirror.exports import Attachment, ExportFormatError, Reaction, detect, read_export

USERS = [
    {
        "id": "U1",
        "name": "ann",
        "real_name": "Ann Lee",
        "tz": "Europe/Paris",
        "profile": {"display_name": "annie", "real_name": "Ann Lee"},
    },
    {"id": "U2", "name": "bob", "real_name": "Bob Ray", "tz": "America/Chicago", "profile": {"display_name": ""}},
    {"id": "B1", "name": "deploybot", "is_bot": True, "profile": {"real_name": "Deploy Bot"}},
]
CHANNELS = [{"id": "C1", "name": "general", "members": ["U1", "U2"]}, {"id": "C2", "name": "random", "members": ["U1"]}]
DAY_1 = [
    {
        "type": "message",
        "subtype": "channel_join",
        "user": "U2",
        "text": "<@U2> has joined the channel",
        "ts": "1700000000.000100",
    },
    {
        "type": "message",
        "user": "U1",
        "text": "Hi <@U2>, see <#C2|random> and <https://x.org/a?b=1&amp;c=2|the doc> &amp; <https://y.org>",
        "ts": "1700000100.000200",
        "thread_ts": "1700000100.000200",
        "reply_count": 1,
    },
    {
        "type": "message",
        "user": "U2",
        "text": "&lt;3 thanks <!here>",
        "ts": "1700000200.000300",
        "thread_ts": "1700000100.000200",
        "parent_user_id": "U1",
        "edited": {"user": "U2", "ts": "1700000300.000000"},
    },
    {
        "type": "message",
        "subtype": "bot_message",
        "bot_id": "B9",
        "username": "CI",
        "text": "build green",
        "ts": "1700000400.000000",
    },
    {"type": "message", "subtype": "message_deleted", "ts": "1700000500.000000", "deleted_ts": "1700000100.000200"},
    {
        "type": "message",
        "subtype": "file_share",
        "user": "U1",
        "text": "the plan",
        "ts": "1700000600.000000",
        "files": [
            {"id": "F1", "name": "plan.pdf", "title": "Plan", "mimetype": "application/pdf"},
            {"id": "F2", "name": "map.png", "mimetype": "image/png"},
        ],
    },
]
DAY_2 = [
    {"type": "message", "user": "U1", "text": "next day", "ts": "1700090000.000000"},
    {"type": "message", "user": "B1", "text": "deployed", "ts": "1700090001.000000"},
]


def _write(root):
    (root / "general").mkdir(parents=True)
    (root / "random").mkdir()
    (root / "users.json").write_text(json.dumps(USERS), encoding="utf-8")
    (root / "channels.json").write_text(json.dumps(CHANNELS), encoding="utf-8")
    (root / "general" / "2023-11-14.json").write_text(json.dumps(DAY_1), encoding="utf-8")
    (root / "general" / "2023-11-15.json").write_text(json.dumps(list(reversed(DAY_2))), encoding="utf-8")
    (root / "random" / "2023-11-14.json").write_text(
        json.dumps([{"type": "message", "user": "U1", "text": "lonely", "ts": "1700000000.000001"}]), encoding="utf-8"
    )
    return root


def _read(path, **kwargs):
    return [(c, list(c.messages())) for c in read_export(path, **kwargs)]


def test_channels_threads_markup_subtypes_and_bots(tmp_path):
    root = _write(tmp_path / "Acme Slack export")
    assert detect(root) == "slack"
    progress = []
    [(general, messages), (random, lonely)] = _read(root, on_progress=lambda *p: progress.append(p))
    assert progress == [(1, 2, "general"), (2, 2, "random")]
    assert (general.key, general.title, general.participants) == ("slack_general", "general", ("Ann Lee", "Bob Ray"))
    assert (general.tz, general.tz_source) == ("Europe/Paris", "file")  # members tie: the first
    assert [(m.local_id, m.author, m.text, m.system, m.bot, m.reply_to, m.edited) for m in messages] == [
        ("1700000000.000100", "Bob Ray", "@Bob Ray has joined the channel", True, False, None, False),
        (
            "1700000100.000200",
            "Ann Lee",
            "Hi @Bob Ray, see #random and the doc & https://y.org",
            False,
            False,
            None,
            False,
        ),
        ("1700000200.000300", "Bob Ray", "<3 thanks @here", False, False, "1700000100.000200", True),
        ("1700000400.000000", "CI", "build green", False, True, None, False),
        ("1700000600.000000", "Ann Lee", "the plan", False, False, None, False),
        ("1700090000.000000", "Ann Lee", "next day", False, False, None, False),
        ("1700090001.000000", "Deploy Bot", "deployed", False, True, None, False),
    ]
    assert messages[1].timestamp == datetime(2023, 11, 14, 22, 15, 0, 200, tzinfo=UTC)
    assert {m.tz for m in messages} == {"Europe/Paris"}
    assert messages[4].attachments == (Attachment("document", "plan.pdf", "Plan"), Attachment("photo", "map.png", None))
    assert random.key == "slack_random" and [m.text for m in lonely] == ["lonely"]
    assert general.source == str(root / "general")


def test_zip_export_with_a_top_folder_reads_the_same(tmp_path):
    root = _write(tmp_path / "export" / "Acme")
    archive = shutil.make_archive(str(tmp_path / "acme"), "zip", root_dir=tmp_path / "export")
    assert detect(archive) == "slack"
    from_zip = [(c.key, [(m.local_id, m.text) for m in ms]) for c, ms in _read(archive)]
    from_folder = [(c.key, [(m.local_id, m.text) for m in ms]) for c, ms in _read(root)]
    assert from_zip == from_folder and len(from_zip[0][1]) == 7


def test_messages_are_read_lazily_one_day_file_at_a_time(tmp_path):
    root = _write(tmp_path / "ws")
    conversations = read_export(root)
    general = next(conversations)
    (root / "general" / "2023-11-15.json").write_text("[", encoding="utf-8")  # read only on iteration
    with pytest.raises(ExportFormatError, match=r"general/2023-11-15.json: line 1: invalid JSON"):
        list(general.messages())


def test_an_unreadable_message_is_one_warning_and_the_rest_of_the_channel_is_read(tmp_path):
    root = _write(tmp_path / "ws")
    day = root / "random" / "2023-11-14.json"
    day.write_text(
        json.dumps(
            [
                {"type": "message", "user": "U1", "text": "no ts"},
                {"user": "U1", "text": "x", "ts": "soon"},
                {"text": "nobody", "ts": "1700000001.000000"},
                "not a message",
                {"type": "message", "user": "U2", "text": "still here", "ts": "1700000002.000000"},
            ]
        )
    )
    [_, random] = list(read_export(root))
    assert [(m.author, m.text) for m in random.messages()] == [("Bob Ray", "still here")]
    assert random.warnings == [
        f"{day}: [0].ts: missing (message [0] left out; the rest of the channel is read)",
        f"{day}: [1].ts: bad timestamp 'soon' (message ts soon left out; the rest of the channel is read)",
        f"{day}: [2].user: missing (no user, username, bot_profile or bot_id) "
        "(message ts 1700000001.000000 left out; the rest of the channel is read)",
        f"{day}: [3]: expected a message object, found str (message [3] left out; the rest of the channel is read)",
    ]
    list(random.messages())  # a second pass reports the same lines, not twice as many
    assert len(random.warnings) == 4


def test_direct_messages_are_titled_by_their_members(tmp_path):
    root = _write(tmp_path / "ws")
    (root / "dms.json").write_text(json.dumps([{"id": "D9", "members": ["U1", "U2"]}]), encoding="utf-8")
    (root / "D9").mkdir()
    (root / "D9" / "2023-11-16.json").write_text(
        json.dumps([{"type": "message", "user": "U2", "text": "psst", "ts": "1700100000.000000"}]), encoding="utf-8"
    )
    conversations = {c.key: c for c in read_export(root)}
    dm = conversations["slack_ann_lee_bob_ray"]
    assert (dm.title, dm.participants) == ("Ann Lee, Bob Ray", ("Ann Lee", "Bob Ray"))
    assert [(m.author, m.text) for m in dm.messages()] == [("Bob Ray", "psst")]


# (what Slack stored, what people read): mrkdwn markers wrap words at word boundaries; the rest is text.
MRKDWN = [
    (
        "*Room change* for Thursday: we're in _Aurora_ now, not ~Bellevue~",
        "Room change for Thursday: we're in Aurora now, not Bellevue",
    ),
    (
        "Agenda: *1. budget*, _maybe_ hiring (~old~ plan dropped).",
        "Agenda: 1. budget, maybe hiring (old plan dropped).",
    ),
    ("*_really_ important*, <@U2>: ~*no* longer~ needed", "really important, @Bob Ray: no longer needed"),
    ("*see <https://wiki.acme.org/rooms|the floor plan>*", "see the floor plan"),
    ("5*3 = 15, and 2 * 4 = 8", "5*3 = 15, and 2 * 4 = 8"),
    (
        "rename snake_case_name in file_name.txt and __init__.py",
        "rename snake_case_name in file_name.txt and __init__.py",
    ),
    ("backups are in ~/path/to/backups and ~/notes", "backups are in ~/path/to/backups and ~/notes"),
    (
        "<https://wiki.acme.org/_drafts_/plan_v2|draft> at <https://x.org/*star*/a~b~/>, or https://y.org/_a_/b",
        "draft at https://x.org/*star*/a~b~/, or https://y.org/_a_/b",
    ),
    ("run `make *all*` then ```rm ~tmp~ _x_```", "run `make *all*` then ```rm ~tmp~ _x_```"),
    ("rated it 4* at best, *sigh", "rated it 4* at best, *sigh"),
    # Emoji codes are drawn as Slack draws them; a workspace's own emoji and code stay as written.
    (":white_check_mark: done :tada: _:+1:_", "✅ done 🎉 👍"),
    ("in at 10:30:00 :+1::skin-tone-3: :partyparrot: `:tada:`", "in at 10:30:00 👍🏼 :partyparrot: `:tada:`"),
    # Slack's own names (iamcal's emoji-data), a skin tone inside a joined emoji.
    (
        "Fiona on judging :female-judge: :woman-raising-hand::skin-tone-2: :face_palm:",
        "Fiona on judging 👩\u200d⚖️ 🙋🏻\u200d♀️ 🤦",
    ),
]


def test_reactions_are_kept_with_who_reacted(tmp_path):
    root = _write(tmp_path / "ws")
    day = json.loads((root / "general" / "2023-11-15.json").read_text(encoding="utf-8"))
    day[-1]["reactions"] = [  # "next day", by Ann: written last, the file lists newest first
        {"name": "+1::skin-tone-2", "users": ["U2", "U1"], "count": 2},
        {"name": "partyparrot", "users": ["U2"], "count": 3},  # Slack lists at most 50 users
        {"name": "eyes", "users": "U2"},  # damaged: no one listed, no count
    ]
    (root / "general" / "2023-11-15.json").write_text(json.dumps(day), encoding="utf-8")
    [general, _] = list(read_export(root))
    message = next(m for m in general.messages() if m.text == "next day")
    assert message.reactions == (
        Reaction("👍🏻", ("Bob Ray", "Ann Lee"), 2),
        Reaction(":partyparrot:", ("Bob Ray",), 3),
        Reaction("👀", (), 0),
    )


def test_bold_italic_and_strike_markers_are_read_as_their_words(tmp_path):
    root = _write(tmp_path / "ws")
    (root / "random" / "2023-11-14.json").write_text(
        json.dumps(
            [
                {"type": "message", "user": "U1", "text": said, "ts": f"17000000{n:02}.000000"}
                for n, (said, _) in enumerate(MRKDWN)
            ]
        ),
        encoding="utf-8",
    )
    [_, random] = list(read_export(root))
    assert [m.text for m in random.messages()] == [read for _, read in MRKDWN]
