"""Slack messages whose words are not (only) in ``text``: bots' attachments and blocks, files,
legacy subtypes, names from users.json, mentions, and the channel's zone."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from narrative_mirror.exports import Attachment, read_export

USERS = [
    {
        "id": "U1",
        "name": "ann.lee",
        "real_name": "Ann Lee",
        "tz": "Europe/Berlin",
        "profile": {"display_name": "annie", "real_name": "Ann Lee"},
    },
    {"id": "U2", "name": "bob", "tz": "Europe/Berlin", "profile": {"display_name": "Bobby", "real_name": ""}},
    {"id": "U3", "name": "cy", "real_name": "Cy Po", "tz": "America/New_York", "profile": {"real_name": "Cy Po"}},
    {
        "id": "U9",
        "name": "jira",
        "is_bot": True,
        "tz": "America/Los_Angeles",
        "profile": {"real_name": "Jira Cloud", "bot_id": "B9"},
    },
]
CHANNELS = [{"id": "C1", "name": "ops", "members": ["U1", "U2", "U3", "U9"]}]
TS = 1710237660  # 2024-03-12 10:01:00 UTC, 11:01 in Berlin
DAY = [
    {
        "type": "message",
        "subtype": "bot_message",
        "bot_id": "B9",
        "text": "",
        "ts": f"{TS}.000001",
        "attachments": [
            {
                "fallback": "[OPS-7] Disk full",
                "pretext": "New issue",
                "title": "OPS-7 Disk full",
                "text": "db1 at 99%",
                "fields": [{"title": "Priority", "value": "High", "short": True}],
            }
        ],
    },
    {
        "type": "message",
        "subtype": "bot_message",
        "bot_id": "B7",
        "username": "deploy",
        "text": "This content can't be displayed.",
        "ts": f"{TS}.000002",
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": "Deploy 42"}},
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": "*api* shipped by <@U1>"},
                "fields": [{"type": "mrkdwn", "text": "env: prod"}],
            },
            {"type": "divider"},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": "took 3 min"}]},
        ],
    },
    {
        "type": "message",
        "bot_id": "B8",
        "bot_profile": {"name": "Standup"},
        "ts": f"{TS}.000003",
        "attachments": [{"fallback": "Yesterday: fixed the lamp"}],
    },
    {
        "type": "message",
        "user": "U2",
        "text": "hey <@U1> and <@U3>",
        "ts": f"{TS}.000004",
        "blocks": [
            {
                "type": "rich_text",
                "elements": [
                    {
                        "type": "rich_text_section",
                        "elements": [{"type": "text", "text": "hey "}, {"type": "user", "user_id": "U1"}],
                    }
                ],
            }
        ],
    },
    {
        "type": "message",
        "user": "U3",
        "text": "",
        "ts": f"{TS}.000005",
        "blocks": [
            {
                "type": "rich_text",
                "elements": [
                    {
                        "type": "rich_text_section",
                        "elements": [
                            {"type": "text", "text": "see "},
                            {"type": "link", "url": "https://x.org", "text": "the doc"},
                            {"type": "emoji", "name": "tada", "unicode": "1f389"},
                        ],
                    },
                    {
                        "type": "rich_text_list",
                        "elements": [
                            {"type": "rich_text_section", "elements": [{"type": "text", "text": "one"}]},
                            {"type": "rich_text_section", "elements": [{"type": "text", "text": "two"}]},
                        ],
                    },
                    {"type": "rich_text_quote", "elements": [{"type": "text", "text": "quoted"}]},
                ],
            }
        ],
    },
    {
        "type": "message",
        "subtype": "file_share",
        "user": "U1",
        "text": "",
        "ts": f"{TS}.000006",
        "files": [
            {"name": "plan.pdf", "title": "Q3 plan", "mimetype": "application/pdf"},
            {"title": "whiteboard", "mimetype": "image/jpeg"},
        ],
    },
    {
        "type": "message",
        "subtype": "file_comment",
        "text": "<@U3> commented on plan.pdf: looks good",
        "ts": f"{TS}.000007",
        "file": {"name": "plan.pdf", "title": "Q3 plan"},
        "comment": {"id": "Fc1", "user": "U3", "comment": "looks good <@U1>"},
    },
    {
        "type": "message",
        "subtype": "thread_broadcast",
        "user": "U1",
        "text": "shipping today",
        "ts": f"{TS}.000008",
        "thread_ts": f"{TS}.000004",
        "root": {"ts": f"{TS}.000004"},
    },
    {
        "type": "message",
        "subtype": "channel_join",
        "user": "U3",
        "text": "<@U3> has joined the channel",
        "ts": f"{TS}.000009",
    },
    {
        "type": "message",
        "subtype": "channel_leave",
        "user": "U2",
        "text": "<@U2> has left the channel",
        "ts": f"{TS}.000010",
    },
    {
        "type": "message",
        "subtype": "channel_topic",
        "user": "U1",
        "topic": "outages",
        "text": "<@U1> set the channel topic: outages",
        "ts": f"{TS}.000011",
    },
    {
        "type": "message",
        "subtype": "channel_purpose",
        "user": "U1",
        "text": "<@U1> set the channel purpose: keep it up",
        "ts": f"{TS}.000012",
    },
    {"type": "message", "subtype": "me_message", "user": "U2", "text": "waves", "ts": f"{TS}.000013"},
    {
        "type": "message",
        "subtype": "tombstone",
        "user": "USLACKBOT",
        "hidden": True,
        "text": "This message was deleted.",
        "ts": f"{TS}.000014",
        "thread_ts": f"{TS}.000014",
    },
    {"type": "message", "user": "U9", "text": "OPS-7 resolved", "ts": f"{TS}.000015"},
]


def _export(root, day=DAY, users=USERS):
    (root / "ops").mkdir(parents=True)
    (root / "users.json").write_text(json.dumps(users), encoding="utf-8")
    (root / "channels.json").write_text(json.dumps(CHANNELS), encoding="utf-8")
    (root / "ops" / "2024-03-12.json").write_text(json.dumps(day), encoding="utf-8")
    return root


def test_every_message_keeps_its_words_author_and_files(tmp_path):
    [ops] = read_export(_export(tmp_path / "ws"))
    messages = list(ops.messages())
    assert ops.warnings == []
    assert [(m.author, m.text, m.bot, m.system) for m in messages] == [
        ("Jira Cloud", "New issue\nOPS-7 Disk full\ndb1 at 99%\nPriority: High", True, False),
        ("deploy", "Deploy 42\napi shipped by @Ann Lee\nenv: prod\ntook 3 min", True, False),
        ("Standup", "Yesterday: fixed the lamp", True, False),
        ("Bobby", "hey @Ann Lee and @Cy Po", False, False),
        ("Cy Po", "see the doc\U0001f389\n- one\n- two\n> quoted", False, False),
        ("Ann Lee", "", False, False),
        ("Cy Po", "looks good @Ann Lee", False, False),
        ("Ann Lee", "shipping today", False, False),
        ("Cy Po", "@Cy Po has joined the channel", False, True),
        ("Bobby", "@Bobby has left the channel", False, True),
        ("Ann Lee", "@Ann Lee set the channel topic: outages", False, True),
        ("Ann Lee", "@Ann Lee set the channel purpose: keep it up", False, True),
        ("Bobby", "Bobby waves", False, False),
        ("", "This message was deleted.", False, True),
        ("Jira Cloud", "OPS-7 resolved", True, False),
    ]
    assert messages[5].attachments == (
        Attachment("document", "plan.pdf", "Q3 plan"),
        Attachment("photo", "whiteboard", None),
    )
    assert messages[6].attachments == (Attachment("document", "plan.pdf", "Q3 plan"),)
    assert messages[7].reply_to == f"{TS}.000004"
    assert ops.participants == ("Ann Lee", "Bobby", "Cy Po")  # the bot member is no participant


def test_the_channel_is_shown_in_the_zone_most_of_its_people_have(tmp_path):
    [ops] = read_export(_export(tmp_path / "ws"))
    first = next(ops.messages())
    assert (ops.tz, ops.tz_source) == ("Europe/Berlin", "file")  # 2 in Berlin, 1 in New York, the bot ignored
    assert (first.tz, first.tz_source) == ("Europe/Berlin", "file")
    assert first.timestamp == datetime(2024, 3, 12, 10, 1, 0, 1, tzinfo=UTC)
    # --tz, given to a folder for its WhatsApp or Signal files, does not override what people recorded.
    [given] = read_export(tmp_path / "ws", tz="Asia/Tokyo")
    assert (given.tz, given.tz_source, next(given.messages()).tz) == ("Europe/Berlin", "file", "Europe/Berlin")


def test_people_without_a_zone_read_in_the_given_zone_else_utc(tmp_path):
    users = [{**u, "tz": None} for u in USERS]
    [ops] = read_export(_export(tmp_path / "ws", users=users))
    assert (ops.tz, next(ops.messages()).tz) == ("UTC", "UTC")
    [given] = read_export(tmp_path / "ws", tz="Asia/Tokyo")
    assert (given.tz, given.tz_source, next(given.messages()).tz) == ("Asia/Tokyo", "--tz", "Asia/Tokyo")
