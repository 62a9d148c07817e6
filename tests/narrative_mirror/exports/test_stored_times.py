"""The stored message record (schema.MESSAGE_RECORD) of each format: ``timestamp`` is the wall
clock in the zone the message records, ``utc_time`` the instant, ``tz`` that zone; a reader's
warning lines become the chat's notes."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from test_slack_subtypes import _export
from test_telegram_messages import CHAT as TELEGRAM_CHAT

from narrative_mirror.exports import read_export
from narrative_mirror.exports.folder import ImportOptions
from narrative_mirror.exports.frames import conversation_chat

MACHINE_IN_TOKYO = ImportOptions(machine_tz="Asia/Tokyo")


def _frame(path, options=MACHINE_IN_TOKYO):
    [conversation] = read_export(path, options.format, options.tz, options.day_first, machine_tz=options.machine_tz)
    return conversation_chat(conversation, options)


def test_slack_rows_show_the_channel_zone_not_the_machine_zone(tmp_path):
    root = _export(tmp_path / "ws")
    (root / "ops" / "2024-03-13.json").write_text(json.dumps([{"user": "U1", "text": "x", "ts": "never"}]))
    chat = _frame(root)
    first = chat.messages.row(0, named=True)
    assert (first["timestamp"], first["utc_time"], first["tz"], first["tz_source"]) == (
        datetime(2024, 3, 12, 11, 1, 0, 1),
        datetime(2024, 3, 12, 10, 1, 0, 1, tzinfo=UTC),
        "Europe/Berlin",
        "file",
    )
    assert (chat.tz, chat.tz_source) == ("Europe/Berlin", "file")
    assert chat.notes == [
        f"{root / 'ops' / '2024-03-13.json'}: [0].ts: bad timestamp 'never' "
        "(message ts never left out; the rest of the channel is read)"
    ]


def test_telegram_rows_show_the_date_the_export_wrote(tmp_path):
    path = tmp_path / "result.json"
    path.write_text(json.dumps(TELEGRAM_CHAT, ensure_ascii=False), encoding="utf-8")
    frame = _frame(path).messages
    written = [datetime.fromisoformat(m["date"]) for m in TELEGRAM_CHAT["messages"]]
    assert frame["timestamp"].to_list() == written  # UTC+1 before the clocks changed, UTC+2 after
    assert frame["tz"].to_list()[:5] == ["UTC+01:00"] * 4 + ["UTC+02:00"]


def test_whatsapp_rows_show_the_given_zone(tmp_path):
    path = tmp_path / "WhatsApp Chat with Bo.txt"
    path.write_text("12/03/2024, 09:20 - Bo: hi\n", encoding="utf-8")
    row = _frame(path, ImportOptions(tz="America/New_York", day_first=True)).messages.row(0, named=True)
    assert (row["timestamp"], row["utc_time"], row["tz"], row["tz_source"]) == (
        datetime(2024, 3, 12, 9, 20),
        datetime(2024, 3, 12, 13, 20, tzinfo=UTC),
        "America/New_York",
        "--tz",
    )


def test_messenger_epochs_are_shown_in_the_given_or_machine_zone(tmp_path):
    thread = tmp_path / "inbox" / "max_1"
    thread.mkdir(parents=True)
    (thread / "message_1.json").write_text(
        json.dumps(
            {
                "participants": [{"name": "Max"}],
                "title": "Max",
                "messages": [{"sender_name": "Max", "timestamp_ms": 1700000000000, "content": "hi"}],
            }
        ),
        encoding="utf-8",
    )
    row = _frame(thread / "message_1.json").messages.row(0, named=True)
    assert (row["timestamp"], row["utc_time"], row["tz"], row["tz_source"]) == (
        datetime(2023, 11, 15, 7, 13, 20),
        datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC),
        "Asia/Tokyo",
        "machine",
    )
