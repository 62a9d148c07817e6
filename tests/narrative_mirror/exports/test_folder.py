"""A data folder of chat files and chat exports: keys, versions, cached scans, the message record
each conversation becomes, gap sessions, bad exports named, reading options remembered."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, date, datetime, timedelta

import polars as pl
import writers

from narrative_mirror import schema, settings
from narrative_mirror.exports import folder as folder_module
from narrative_mirror.exports.folder import NATIVE, ImportOptions, find_folder_chats, remembered_options
from narrative_mirror.exports.frames import load_export_chat
from narrative_mirror.layers.sessions import sessions_by_gap

T0 = datetime(2024, 3, 14, 8, 0, tzinfo=UTC)  # day 14: WhatsApp's day order is not ambiguous
BERLIN = ImportOptions(tz="Europe/Berlin", machine_tz="UTC")


def _messages(n: int, start: datetime = T0, pause_after: int | None = None) -> list:
    """``n`` messages of two people 5 minutes apart (+ 6 hours after message ``pause_after``)."""
    out = []
    for i in range(n):
        moment = (
            start
            + timedelta(minutes=5 * i)
            + (timedelta(hours=6) if pause_after is not None and i > pause_after else timedelta())
        )
        out.append(("Ana" if i % 2 == 0 else "Ben Ode", moment, f"note {i}: the bike needs a new chain", None))
    return out


def test_a_mixed_folder_gives_one_partition_per_conversation_with_safe_stable_keys(tmp_path):
    data = tmp_path / "chats"
    data.mkdir()
    shutil.copy(settings.DEMO_DATA_DIR / "demo_garden_Mara_Theo.json", data)
    writers.whatsapp_android(_messages(6), data, tz="Europe/Berlin", title="Ben Ödé 🚲")
    slack_root = writers.slack(_messages(4), data, channel="général", channel_id="C42")
    writers.discord(_messages(3), data, tz="Europe/Berlin")
    (data / "notes.md").write_text("not a chat")  # other files are no chats and no problems
    chats, problems = find_folder_chats(data, BERLIN)
    assert problems == []
    keys = sorted(chats)
    assert keys[0] == "demo_garden_Mara_Theo"
    assert keys[1:] == ["discord_general", "slack_general", "whatsapp_ben_ode"]
    assert chats["slack_general"].path == slack_root and chats["slack_general"].format == "slack"
    assert (chats["demo_garden_Mara_Theo"].format, chats[keys[3]].format) == (NATIVE, "whatsapp")
    assert chats[keys[3]].title == "Ben Ödé 🚲"
    # The same export written again (a re-export with the same messages): same keys, same versions.
    again, _ = find_folder_chats(data, BERLIN)
    assert {k: c.version for k, c in again.items()} == {k: c.version for k, c in chats.items()}


def test_a_longer_export_changes_only_its_conversation_and_unchanged_exports_are_not_parsed_again(
    tmp_path, monkeypatch
):
    data = tmp_path / "chats"
    data.mkdir()
    cache = tmp_path / "cache"
    writers.telegram(_messages(5), data, tz="Europe/Berlin")
    writers.discord(_messages(5), data, tz="Europe/Berlin")
    first, _ = find_folder_chats(data, BERLIN, cache)
    folder_module._MEMORY.clear()  # a new process: only the cache on disk
    parsed = []
    real_parse = folder_module._parse
    monkeypatch.setattr(folder_module, "_parse", lambda path, *a: parsed.append(path.name) or real_parse(path, *a))
    assert {k: c.version for k, c in find_folder_chats(data, BERLIN, cache)[0].items()} == {
        k: c.version for k, c in first.items()
    }
    assert parsed == []
    writers.telegram(_messages(7), data, tz="Europe/Berlin")
    second, _ = find_folder_chats(data, BERLIN, cache)
    assert parsed == ["result.json"]
    assert second["telegram_chat"].version != first["telegram_chat"].version
    assert second["discord_general"].version == first["discord_general"].version
    # Another zone reads other UTC times: a new version.
    tokyo = find_folder_chats(data, ImportOptions(tz="Asia/Tokyo", machine_tz="UTC"), cache)[0]
    assert tokyo["telegram_chat"].version != second["telegram_chat"].version
    # Another session gap (layers.toml [sessions]): new versions of the exports, none of chat files.
    shutil.copy(settings.DEMO_DATA_DIR / "demo_garden_Mara_Theo.json", data)
    gaps = [
        find_folder_chats(data, ImportOptions(tz="Europe/Berlin", machine_tz="UTC", session_gap_hours=h), cache)[0]
        for h in (4.0, 2.0)
    ]
    assert gaps[0]["telegram_chat"].version != gaps[1]["telegram_chat"].version
    assert gaps[0]["demo_garden_Mara_Theo"].version == gaps[1]["demo_garden_Mara_Theo"].version


def test_bad_exports_are_one_line_each_naming_file_and_place_and_the_good_chats_are_still_found(tmp_path):
    data = tmp_path / "chats"
    data.mkdir()
    # Every date with both fields <= 12: the order cannot be told.
    writers.whatsapp_ios(_messages(3, start=datetime(2024, 3, 5, 8, 0, tzinfo=UTC)), data, tz="UTC", title="Amb")
    root = writers.slack(_messages(3), data)
    (root / "general" / "2024-03-15.json").write_text('[{"type": "message", "user": "U0000001", "ts": 17}]')
    writers.discord(_messages(2), data, tz="UTC")
    chats, problems = find_folder_chats(data, ImportOptions(machine_tz="UTC"))
    # One unreadable Slack message leaves the channel in (see test_slack: it is one warning).
    assert sorted(chats) == ["discord_general", "slack_general"]
    assert problems == [
        f"{data / 'WhatsApp Chat - Amb' / '_chat.txt'}: line 1: 05/03/2024 could be 5 March or 3 May 2024; "
        "pass --day-first or --month-first"
    ]
    # The order given: it builds.
    chats, problems = find_folder_chats(data, ImportOptions(day_first=True, machine_tz="UTC"))
    assert "whatsapp_amb" in chats


def test_a_conversation_becomes_the_message_record_of_every_format(tmp_path):
    messages = _messages(6, pause_after=2)
    messages[4] = ("Ben Ode", messages[4][1], "answering note 1", 1)
    writers.telegram(messages, tmp_path, tz="Europe/Berlin")
    source = find_folder_chats(tmp_path, BERLIN)[0]["telegram_chat"]
    chat = load_export_chat(source, BERLIN)
    frame = chat.messages
    assert dict(frame.schema) == schema.MESSAGE_RECORD
    assert (chat.format, chat.tz, chat.tz_source, chat.speakers) == (
        "telegram",
        "UTC+01:00",
        "file",
        ["Ana", "Ben Ode"],
    )
    assert frame["local_id"].to_list() == ["1", "2", "3", "4", "5", "6"]
    assert frame["message_id"][0] == "telegram_chat/1"
    assert frame["reply_to"].to_list() == [None, None, None, None, "2", None]
    assert frame["session"].to_list() == [1, 1, 1, 2, 2, 2]  # 6 h of silence > layers.toml gap (4 h)
    assert frame["utc_time"][3] == datetime(2024, 3, 14, 14, 15, tzinfo=UTC)
    # Local wall-clock time in the chat's zone (Berlin, UTC+1 in March): what relative dates read.
    assert frame["timestamp"][0] == datetime(2024, 3, 14, 9, 0)
    assert frame["system"].to_list() == [False] * 6 and frame["edited"].to_list() == [False] * 6


def test_whatsapp_local_times_read_in_the_given_zone_and_system_lines_kept_out_of_the_index(tmp_path):
    path = tmp_path / "WhatsApp Chat with Ben.txt"
    path.write_text(
        "14/03/2024, 09:00 - Messages and calls are end-to-end encrypted.\n"
        "14/03/2024, 09:01 - Ana: hi Ben\nsecond line\n"
        "14/03/2024, 09:02 - Ben: <Media omitted>\n"
        "14/03/2024, 09:03 - Ben: fixed it <This message was edited>\n",
        encoding="utf-8",
    )
    options = ImportOptions(tz="America/New_York", machine_tz="UTC")
    source = find_folder_chats(tmp_path, options)[0]["whatsapp_ben"]
    frame = load_export_chat(source, options).messages
    assert frame.select("speaker", "text", "system", "edited").rows() == [
        ("", "Messages and calls are end-to-end encrypted.", True, False),
        ("Ana", "hi Ben\nsecond line", False, False),
        ("Ben", "", False, False),
        ("Ben", "fixed it", False, True),
    ]
    assert frame["utc_time"][1] == datetime(2024, 3, 14, 13, 1, tzinfo=UTC)  # EDT, UTC-4
    assert frame["tz"].unique().to_list() == ["America/New_York"] and frame["tz_source"][0] == "--tz"
    assert frame["attachments"][2].to_list() == [{"kind": "media", "name": "", "caption": None}]

    from narrative_mirror.index_rows import build_rows, message_rows

    vectors = pl.DataFrame(
        {
            "message_id": frame["message_id"],
            "chat_file": frame["chat_file"],
            "local_id": frame["local_id"],
            "vector": [[1.0, 0.0]] * 4,
        },
        schema=schema.MESSAGE_EMBEDDINGS,
    )
    assert message_rows(frame, vectors)["local_id"].to_pylist() == frame["local_id"].to_list()[1:]
    ids = frame["local_id"].to_list()
    blocks = pl.DataFrame(
        [
            {
                "block_id": "b0",
                "chat_file": "whatsapp_ben",
                "session": 1,
                "block_index": 0,
                "first_position": 0,
                "last_position": 3,
                "message_ids": ids,
                "start_time": frame["timestamp"][0],
                "end_time": frame["timestamp"][3],
                "speakers": ["Ana", "Ben"],
                "keywords": [],
                "label": "",
                "summary": "",
            },
            {
                "block_id": "b1",
                "chat_file": "whatsapp_ben",
                "session": 1,
                "block_index": 1,
                "first_position": 0,
                "last_position": 0,
                "message_ids": ids[:1],
                "start_time": frame["timestamp"][0],
                "end_time": frame["timestamp"][0],
                "speakers": [],
                "keywords": [],
                "label": "",
                "summary": "",
            },
        ],
        schema=schema.BLOCKS,
    )
    rows = build_rows(frame, vectors, blocks=blocks)
    assert rows["blocks"].to_pydict()["message_ids"] == [ids[1:]]  # the block of only a system line: gone


def test_sessions_by_gap_with_slack_days_and_threads():
    t = [
        datetime(2024, 1, 1, 9),
        datetime(2024, 1, 1, 10),
        datetime(2024, 1, 1, 16),
        datetime(2024, 1, 1, 23),
        datetime(2024, 1, 2, 0, 30),
        datetime(2024, 1, 2, 1),
    ]
    gap = timedelta(hours=4)
    assert sessions_by_gap(t, gap) == [1, 1, 2, 3, 3, 3]
    days = [m.date() for m in t]
    assert sessions_by_gap(t, gap, days=days) == [1, 1, 2, 3, 4, 4]
    # A reply to a message of the current session stays in it (after a gap, or on the next day).
    ids = ["a", "b", "c", "d", "e", "f"]
    roots = [None, None, "b", None, "d", None]
    assert sessions_by_gap(t, gap, days=days, ids=ids, thread_roots=roots) == [1, 1, 1, 2, 2, 2]
    assert days[4] == date(2024, 1, 2)


def test_reading_options_are_remembered_per_folder(tmp_path):
    home, data = tmp_path / "home", tmp_path / "chats"
    data.mkdir()
    assert remembered_options(home, data, None, "UTC") == ImportOptions(machine_tz="UTC")
    given = ImportOptions(format="whatsapp", tz="Europe/Berlin", day_first=True)
    assert remembered_options(home, data, given, "UTC") == ImportOptions("whatsapp", "Europe/Berlin", True, "UTC")
    assert remembered_options(home, data, None, "Asia/Tokyo") == ImportOptions(
        "whatsapp", "Europe/Berlin", True, "Asia/Tokyo"
    )
    assert remembered_options(home, tmp_path, None, "UTC") == ImportOptions(machine_tz="UTC")
    assert json.loads((home / "imports" / "options.json").read_text()) == {
        str(data.resolve()): {"format": "whatsapp", "tz": "Europe/Berlin", "day_first": True}
    }


def test_a_folder_no_reader_recognizes_is_not_a_chat_nor_a_problem(tmp_path):
    data = tmp_path / "data"
    (data / "notes").mkdir(parents=True)
    (data / "notes" / "todo.txt").write_text("buy milk\n", encoding="utf-8")
    assert find_folder_chats(data) == ({}, [])
    # a forced format still reads it, and says what is wrong
    chats, problems = find_folder_chats(data, ImportOptions(format="whatsapp"))
    assert chats == {} and len(problems) == 1 and "notes" in problems[0]


def test_chats_whose_names_share_a_key_get_a_suffix_from_their_native_id_stable_whatever_else_is_there(tmp_path):
    data = tmp_path / "chats"
    data.mkdir()
    writers.discord(_messages(3), data, tz="UTC", channel="general", channel_id="111")
    writers.slack(_messages(3), data, channel="general", channel_id="C42")
    alone, _ = find_folder_chats(data, BERLIN)
    assert sorted(alone) == ["discord_general", "slack_general"]
    writers.discord(_messages(4), data, tz="UTC", channel="General", channel_id="222")  # another server's #General
    both, problems = find_folder_chats(data, BERLIN)
    discord = sorted(k for k in both if k.startswith("discord_"))
    assert problems == [] and len(discord) == 2 and all(k.startswith("discord_general-") for k in discord)
    assert {both[k].native_id for k in discord} == {"111", "222"} and "slack_general" in both
    # The suffix comes from the chat itself: a third chat of that name changes no key.
    writers.discord(_messages(2), data, tz="UTC", channel="GENERAL", channel_id="333")
    third, _ = find_folder_chats(data, BERLIN)
    assert set(discord) < set(third) and len([k for k in third if k.startswith("discord_")]) == 3
    # Each key reads its own chat.
    chats = {k: load_export_chat(third[k], BERLIN) for k in discord}
    assert sorted(c.messages.height for c in chats.values()) == [3, 4]
    assert all(c.messages["chat_file"].unique().to_list() == [k] for k, c in chats.items())
