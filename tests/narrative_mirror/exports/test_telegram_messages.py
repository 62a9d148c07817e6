"""Telegram messages as people saw them: forwards keep their origin, entities their link targets,
service messages read as the line Telegram shows, media by kind and name, each time in the
offset the exporting machine showed; and reading stays linear in a text's length."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

from narrative_mirror.exports import Attachment, Reaction, read_export


def _message(id_, date, unixtime, **fields):
    return {"id": id_, "type": "message", "date": date, "date_unixtime": str(unixtime), **fields}


def _service(id_, date, unixtime, actor, action, **fields):
    return {
        "id": id_,
        "type": "service",
        "date": date,
        "date_unixtime": str(unixtime),
        "actor": actor,
        "actor_id": "user1",
        "action": action,
        "text": "",
        **fields,
    }


# Berlin: 2024-03-30 is UTC+1, 2024-04-02 is UTC+2 (summer time began 31 March).
CHAT = {
    "name": "Family",
    "type": "private_group",
    "id": 42,
    "messages": [
        _service(1, "2024-03-30T09:00:00", 1711785600, "Ann", "create_group", title="Family", members=["Bob"]),
        _service(2, "2024-03-30T09:01:00", 1711785660, "Ann", "invite_members", members=["Cy", "Dee"]),
        _message(
            3,
            "2024-03-30T09:02:00",
            1711785720,
            **{
                "from": "Bob",
                "from_id": "user2",
                "forwarded_from": "City News",
                "text": ["Road closed: ", {"type": "text_link", "text": "details", "href": "https://news.example/r"}],
            },
        ),
        _message(
            4,
            "2024-03-30T09:03:00",
            1711785780,
            **{
                "from": "Cy",
                "from_id": "user3",
                "saved_from": "Ann",
                "text": "",
                "text_entities": [{"type": "plain", "text": "old "}, {"type": "link", "text": "https://a.example"}],
            },
        ),
        _message(
            5,
            "2024-04-02T18:00:00",
            1712073600,
            **{
                "from": "Dee",
                "from_id": "user4",
                "text": "",
                "reply_to_message_id": 3,
                "edited": "2024-04-02T18:01:00",
                "edited_unixtime": "1712073660",
                "file": "stickers/sticker.webp",
                "media_type": "sticker",
                "sticker_emoji": "😂",
            },
        ),
        _message(
            6,
            "2024-04-02T18:01:00",
            1712073660,
            **{
                "from": "Bob",
                "from_id": "user2",
                "text": "the plan",
                "file": "(File not included. Change data exporting settings to download.)",
                "file_name": "plan.pdf",
                "mime_type": "application/pdf",
            },
        ),
        _message(
            7,
            "2024-04-02T18:02:00",
            1712073720,
            **{
                "from": "Ann",
                "from_id": "user1",
                "text": "",
                "photo": "photos/photo_3@02-04-2024_18-02-00.jpg",
                "width": 800,
                "height": 600,
            },
        ),
        _service(8, "2024-04-02T18:03:00", 1712073780, "Ann", "pin_message", message_id=6),
        _service(9, "2024-04-02T18:04:00", 1712073840, "Dee", "remove_members", members=["Dee"]),
        _service(10, "2024-04-02T18:05:00", 1712073900, "Ann", "remove_members", members=["Cy"]),
        _service(11, "2024-04-02T18:06:00", 1712073960, "Eve", "join_group_by_link", inviter="Ann"),
        _service(12, "2024-04-02T18:07:00", 1712074020, "Bob", "phone_call", duration_seconds=65),
        _service(13, "2024-04-02T18:08:00", 1712074080, "Bob", "phone_call", discard_reason="missed"),
        _service(14, "2024-04-02T18:09:00", 1712074140, "Ann", "edit_group_title", title="Family ❤"),
        _message(
            15,
            "2024-04-02T18:10:00",
            1712074200,
            **{
                "from": "Cy",
                "from_id": "user3",
                "text": "",
                "poll": {
                    "question": "Dinner at 8?",
                    "closed": True,
                    "answers": [{"text": "Yes", "voters": 4, "chosen": True}, {"text": "Later", "voters": 1}],
                },
            },
        ),
        _message(
            16,
            "2024-04-02T18:11:00",
            1712074260,
            **{
                "from": "Cy",
                "from_id": "user3",
                "text": "",
                "location_information": {"latitude": 52.52, "longitude": 13.405},
            },
        ),
    ],
}


def test_forwards_entities_services_and_media_read_as_shown(tmp_path):
    path = tmp_path / "result.json"
    path.write_text(json.dumps(CHAT, ensure_ascii=False), encoding="utf-8")
    [chat] = read_export(path)
    messages = list(chat.messages())
    assert [(m.local_id, m.author, m.text, m.system) for m in messages] == [
        ("1", "Ann", "Ann created the group «Family» with Bob", True),
        ("2", "Ann", "Ann added Cy, Dee", True),
        ("3", "Bob", "[forwarded from City News] Road closed: details (https://news.example/r)", False),
        ("4", "Cy", "[forwarded from Ann] old https://a.example", False),
        ("5", "Dee", "", False),
        ("6", "Bob", "the plan", False),
        ("7", "Ann", "", False),
        ("8", "Ann", 'Ann pinned a message: "the plan"', True),
        ("9", "Dee", "Dee left the group", True),
        ("10", "Ann", "Ann removed Cy", True),
        ("11", "Eve", "Eve joined the group via invite link from Ann", True),
        ("12", "Bob", "Bob started a call (65 s)", True),
        ("13", "Bob", "Missed call from Bob", True),
        ("14", "Ann", "Ann changed the group name to «Family ❤»", True),
        ("15", "Cy", "", False),
        ("16", "Cy", "", False),
    ]
    assert (messages[4].reply_to, messages[4].edited) == ("3", True)
    assert messages[7].reply_to == "6"  # the pin line points at what was pinned
    assert [m.attachments for m in messages[4:7]] == [
        (Attachment("sticker", "sticker.webp", "😂"),),
        (Attachment("document", "plan.pdf", "the plan"),),
        (Attachment("photo", "photo_3@02-04-2024_18-02-00.jpg", None),),
    ]
    assert [m.attachments for m in messages[14:]] == [
        (Attachment("poll", "", "Dinner at 8? Yes 4 votes, Later 1 vote"),),  # what was voted, searchable
        (Attachment("location", "", "52.52 13.405"),),
    ]
    assert chat.participants == ("Bob", "Cy", "Dee", "Ann")


def test_each_message_keeps_the_offset_its_date_was_written_in(tmp_path):
    path = tmp_path / "result.json"
    path.write_text(json.dumps(CHAT, ensure_ascii=False), encoding="utf-8")
    [chat] = read_export(path, tz="Asia/Tokyo")  # the file's own offsets win over --tz
    messages = list(chat.messages())
    assert [(m.tz, m.tz_source) for m in (messages[0], messages[4])] == [("UTC+01:00", "file"), ("UTC+02:00", "file")]
    assert messages[0].timestamp == datetime(2024, 3, 30, 8, 0, tzinfo=UTC)
    assert messages[4].timestamp == datetime(2024, 4, 2, 16, 0, tzinfo=UTC)
    assert (chat.tz, chat.tz_source) == ("UTC+02:00", "file")  # the offset most messages have


def _read_seconds(path) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        [chat] = read_export(path, format="telegram")
        assert len(next(chat.messages()).text) > 1_000_000
        best = min(best, time.perf_counter() - started)
    return best


def test_reading_time_grows_linearly_with_a_text_length(tmp_path):
    seconds = []
    for megabytes in (3, 12):
        path = tmp_path / f"{megabytes}.json"
        chat = {
            "name": "Big",
            "type": "personal_chat",
            "id": 1,
            "messages": [
                _message(1, "2024-01-01T10:00:00", 1704099600, **{"from": "Ann", "text": "x" * (megabytes * 10**6)})
            ],
        }
        path.write_text(json.dumps(chat), encoding="utf-8")
        seconds.append(_read_seconds(path))
    # Linear: 4x the text, about 4x the time; the quadratic reader took 16x (0.25 s -> 4 s).
    assert seconds[1] < max(8 * seconds[0], 0.5), seconds


def test_a_photo_the_export_left_out_has_no_name(tmp_path):
    from narrative_mirror.exports import read_export

    data = {
        "name": "Fair",
        "type": "private_group",
        "id": 77,
        "messages": [
            _message(
                1,
                "2026-06-08T18:04:02",
                1780938242,
                **{
                    "from": "Priti",
                    "from_id": "user5",
                    "text": "the stall plan",
                    "photo": "(File not included. Change data exporting settings to download.)",
                    "width": 1280,
                    "height": 960,
                },
            )
        ],
    }
    path = tmp_path / "result.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    [message] = list(next(iter(read_export(path))).messages())
    assert message.attachments == (Attachment("photo", "", "the stall plan"),) and message.text == "the stall plan"


def _pin_chat(*messages):
    return {"name": "Allotment", "type": "private_supergroup", "id": 1877004512, "messages": list(messages)}


def _read_chat(tmp_path, chat):
    path = tmp_path / "result.json"
    path.write_text(json.dumps(chat, ensure_ascii=False), encoding="utf-8")
    [conversation] = read_export(path, format="telegram")
    return [(m.local_id, m.text, m.reply_to, m.system) for m in conversation.messages()]


def test_a_pin_line_quotes_the_pinned_message_and_replies_to_it(tmp_path):
    rota = "Watering rota:\n  Mon  Priti\n  Wed  Sam\n\nKey is in the blue box"
    chat = _pin_chat(
        _message(48390, "2026-05-04T08:12:40", 1777878760, **{"from": "Priti", "from_id": "user71", "text": rota}),
        _message(48391, "2026-05-04T08:13:05", 1777878785, **{"from": "Sam", "from_id": "user72", "text": "👍"}),
        _service(48392, "2026-05-04T08:14:10", 1777878850, "Priti", "pin_message", message_id=48390),
    )
    assert _read_chat(tmp_path, chat)[2] == (
        "48392",
        'Priti pinned a message: "Watering rota: Mon Priti Wed Sam Key is in the blue box"',
        "48390",
        True,
    )


def test_a_pin_of_a_message_from_before_the_export_says_only_that_a_message_was_pinned(tmp_path):
    chat = _pin_chat(
        _service(48392, "2026-05-04T08:14:10", 1777878850, "Priti", "pin_message", message_id=48001),
        _message(48393, "2026-05-04T08:15:00", 1777878900, **{"from": "Sam", "from_id": "user72", "text": "ta"}),
    )
    assert _read_chat(tmp_path, chat)[0] == ("48392", "Priti pinned a message", None, True)


def test_a_long_pinned_message_is_shortened_in_the_pin_line(tmp_path):
    notice = (
        "AGM moved to Saturday 16 May, 10am at the pavilion. Bring your plot numbers and the £12 "
        "subs; anyone who can't come, message me before Friday please."
    )
    chat = _pin_chat(
        _message(310, "2026-05-01T19:02:11", 1777658531, **{"from": "Joan Tait", "from_id": "user9", "text": notice}),
        _service(311, "2026-05-01T19:02:30", 1777658550, "Joan Tait", "pin_message", message_id=310),
    )
    local_id, text, reply_to, _ = _read_chat(tmp_path, chat)[1]
    quoted = (
        'Joan Tait pinned a message: "AGM moved to Saturday 16 May, 10am at the pavilion. Bring your plot numbers and…"'
    )
    assert (local_id, text, reply_to) == ("311", quoted, "310")
    assert len(text.split(": ", 1)[1].strip('"')) <= 80


def test_reactions_keep_their_count_and_the_people_the_export_names(tmp_path):
    # Telegram lists only the latest few who reacted ("recent"); the count is all of them.
    reactions = [
        {"type": "emoji", "count": 3, "emoji": "❤", "recent": [{"from": "Sam", "from_id": "user72", "date": "x"}]},
        {"type": "custom_emoji", "count": 1, "document_id": "5368324170671202286", "recent": []},
        {"type": "emoji", "emoji": "👍", "recent": [{"from_id": "user73"}, "damaged"]},
    ]
    chat = _pin_chat(
        _message(
            48390, "2026-05-04T08:12:40", 1777878760, **{"from": "Priti", "text": "Rota done", "reactions": reactions}
        )
    )
    path = tmp_path / "result.json"
    path.write_text(json.dumps(chat, ensure_ascii=False), encoding="utf-8")
    [message] = next(iter(read_export(path))).messages()
    assert message.reactions == (
        Reaction("❤", ("Sam",), 3),
        Reaction("custom emoji", (), 1),
        Reaction("👍", ("user73",), 1),
    )
