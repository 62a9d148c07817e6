"""A chat's times in its own recorded zone (narrative_mirror/chat_time.py): the zone most of its
messages name, fixed offsets kept as the file wrote them, ISO 8601 with the offset, and the
stored messages layer read again when it changes."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl

from narrative_mirror import schema, storage
from narrative_mirror.chat_time import StoredClocks, chat_clock, stamp_messages


def layer(rows: list[tuple[str, datetime | None, str]]) -> pl.DataFrame:
    """A messages layer of (local id, UTC instant, recorded zone) rows."""
    return pl.DataFrame(
        {
            "message_id": [f"c/{i}" for i, _, _ in rows],
            "chat_file": ["c"] * len(rows),
            "local_id": [i for i, _, _ in rows],
            "position": list(range(len(rows))),
            "session": [1] * len(rows),
            "speaker": ["Ana"] * len(rows),
            "text": ["hi"] * len(rows),
            "timestamp": [datetime(2024, 1, 1)] * len(rows),
            "image_urls": [[]] * len(rows),
            "image_caption": [""] * len(rows),
            "utc_time": [t for _, t, _ in rows],
            "tz": [z for _, _, z in rows],
            "tz_source": ["file"] * len(rows),
            "reply_to": [None] * len(rows),
            "attachments": [[]] * len(rows),
            "edited": [False] * len(rows),
            "system": [False] * len(rows),
            "bot": [False] * len(rows),
            "reactions": [[]] * len(rows),
        },
        schema=schema.MESSAGE_RECORD,
    )


def test_a_workspace_is_shown_in_the_zone_most_of_its_people_have():
    # Slack: each message carries its author's zone; a bot without one is "UTC"
    clock = chat_clock(
        layer(
            [
                ("1", datetime(2024, 3, 12, 8, 20, 41, tzinfo=UTC), "Europe/Berlin"),
                ("2", datetime(2024, 7, 1, 8, 0, tzinfo=UTC), "Europe/Berlin"),
                ("3", datetime(2024, 7, 1, 8, 5, tzinfo=UTC), "UTC"),
            ]
        )
    )
    assert clock.iso("1", None) == "2024-03-12T09:20:41+01:00"
    assert clock.iso("2", None) == "2024-07-01T10:00:00+02:00"  # summer time
    assert clock.iso("3", None) == "2024-07-01T10:05:00+02:00"  # one clock for the whole conversation
    assert clock.label == "times in Europe/Berlin"


def test_fixed_offsets_stay_as_the_file_wrote_them():
    # Telegram writes each local time with its offset: winter and summer differ
    clock = chat_clock(
        layer(
            [
                ("1", datetime(2024, 1, 5, 8, 0, tzinfo=UTC), "UTC+01:00"),
                ("2", datetime(2024, 7, 5, 8, 0, tzinfo=UTC), "UTC+02:00"),
                ("3", datetime(2024, 7, 6, 8, 0, tzinfo=UTC), "UTC+02:00"),
            ]
        )
    )
    assert [clock.iso(i, None) for i in "123"] == [
        "2024-01-05T09:00:00+01:00",
        "2024-07-05T10:00:00+02:00",
        "2024-07-06T10:00:00+02:00",
    ]
    assert clock.label == "times in UTC+02:00 and UTC+01:00"


def test_a_chat_without_instants_keeps_its_written_times():
    written = datetime(2023, 5, 6, 18, 10)
    clock = chat_clock(layer([("D1:1", None, "")]))
    assert clock.time("D1:1", written) == written and clock.iso("D1:1", written) == "2023-05-06T18:10:00"
    assert clock.label == "times as the chat file wrote them (it records no time zone)"


def test_stored_clocks_read_the_layer_again_when_it_changes(tmp_path):
    path = storage.frame_path(tmp_path, "messages", "c")
    clocks = StoredClocks(tmp_path)
    assert clocks("c").zones == () and clocks("c").local("1") is None  # no stored layer yet
    storage.write_frame(path, layer([("1", datetime(2024, 3, 12, 8, 0, tzinfo=UTC), "Europe/Lisbon")]))
    items = [{"id": "1", "chat": "c", "timestamp": "2024-03-12T08:00:00"}, {"id": "other", "timestamp": None}]
    assert stamp_messages(items, clocks, "c") == ["Europe/Lisbon"]
    assert items == [
        {"id": "1", "chat": "c", "timestamp": "2024-03-12T08:00:00+00:00"},
        {"id": "other", "timestamp": None},
    ]
    storage.write_frame(path, layer([("1", datetime(2024, 3, 12, 8, 0, tzinfo=UTC), "Asia/Tokyo")]))
    assert clocks("c").iso("1", None) == "2024-03-12T17:00:00+09:00"
