"""read_export/detect across formats: round trips through the writers, stable ids, keys, errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import writers

from narrative_mirror.exports import ExportFormatError, detect, read_export
from narrative_mirror.exports.records import conversation_key
from narrative_mirror.keys import validate_partition_key

TZ = "America/Sao_Paulo"
PEOPLE = ["Ana", "Bruno Sá", "Chloé 🌸", "Dev", "Eli", "Fran"]


def chat(count: int) -> list[writers.Message]:
    """``count`` messages among six people, a reply every fifth, some texts repeated on purpose."""
    start = datetime(2024, 2, 10, 23, 50, 30, tzinfo=UTC)
    messages = []
    for index in range(count):
        text = "ok" if index % 7 == 3 else f"message {index} from {PEOPLE[index % 6]}\nsecond line & <b>"
        reply = index - 2 if index % 5 == 4 else None
        messages.append((PEOPLE[index % 6], start + timedelta(minutes=37 * index), text, reply))
    return messages


WRITERS = {
    "whatsapp_android": (lambda m, d: writers.whatsapp_android(m, d, tz=TZ), "whatsapp"),
    "whatsapp_android_24h": (lambda m, d: writers.whatsapp_android(m, d, tz=TZ, hour12=False), "whatsapp"),
    "whatsapp_ios": (lambda m, d: writers.whatsapp_ios(m, d, tz=TZ), "whatsapp"),
    "whatsapp_ios_zip": (lambda m, d: writers.whatsapp_ios(m, d, tz=TZ, as_zip=True), "whatsapp"),
    "telegram": (lambda m, d: writers.telegram(m, d, tz=TZ), "telegram"),
    "slack": (lambda m, d: writers.slack(m, d), "slack"),
    "discord": (lambda m, d: writers.discord(m, d, tz=TZ), "discord"),
    "messenger": (lambda m, d: writers.messenger(m, d, per_file=7), "messenger"),
    "signal": (lambda m, d: writers.signal(m, d, tz=TZ), "signal"),
}


def _read_one(path, writer):
    # Only the writer knows its date order when every day of the chat is 12 or less.
    day_first = True if writer.startswith("whatsapp_ios") else False if writer.startswith("whatsapp") else None
    [conversation] = list(read_export(path, tz=TZ, day_first=day_first))
    return conversation, list(conversation.messages())


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_round_trip_keeps_authors_texts_times_and_replies(tmp_path, writer):
    write, expected_format = WRITERS[writer]
    original = chat(30)
    path = write(original, tmp_path)
    assert detect(path) == expected_format
    conversation, messages = _read_one(path, writer)
    assert conversation.source_format == expected_format
    assert validate_partition_key(conversation.key) == conversation.key
    assert [m.author for m in messages] == [m[0] for m in original]
    assert [m.text for m in messages] == [m[2] for m in original]
    seconds = writer != "whatsapp_android" and writer != "whatsapp_android_24h"
    expected_times = [m[1] if seconds else m[1].replace(second=0) for m in original]
    assert [m.timestamp for m in messages] == expected_times
    assert set(conversation.participants) == set(PEOPLE)
    by_index = [m.local_id for m in messages]
    links = [
        messages.index(next(x for x in messages if x.local_id == m.reply_to)) if m.reply_to else None for m in messages
    ]
    if writer.startswith("whatsapp") or writer == "messenger":
        assert links == [None] * 30  # these formats carry no replies
    elif writer == "signal":
        # a quote of "ok" (said several times) links nowhere; the others find their message
        assert links == [m[3] if m[3] is not None and original[m[3]][2] != "ok" else None for m in original]
    else:
        assert links == [m[3] for m in original]
    assert len(set(by_index)) == 30


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_ids_are_stable_across_a_longer_re_export(tmp_path, writer):
    write, _ = WRITERS[writer]
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir(), second.mkdir()
    old_conversation, old = _read_one(write(chat(40), first), writer)
    new_conversation, new = _read_one(write(chat(60), second), writer)
    assert new_conversation.key == old_conversation.key
    assert [m.local_id for m in new[:40]] == [m.local_id for m in old]
    assert len({m.local_id for m in new}) == 60


def test_detection_errors_are_clear(tmp_path):
    odd = tmp_path / "notes.txt"
    odd.write_text("shopping list\nmilk\n", encoding="utf-8")
    with pytest.raises(
        ExportFormatError,
        match=r"notes.txt: cannot tell the export format: the first line "
        r"'shopping list' is no known chat layout; pass the format",
    ):
        detect(odd)
    unknown_json = tmp_path / "x.json"
    unknown_json.write_text('{"hello": 1}', encoding="utf-8")
    with pytest.raises(
        ExportFormatError, match=r"x.json: cannot tell the export format: a JSON object with keys \['hello'\]"
    ):
        read_export(unknown_json)  # raised when called, before any conversation is read
    with pytest.raises(ExportFormatError, match=r"missing: no such file or folder"):
        detect(tmp_path / "missing")
    with pytest.raises(ValueError, match=r"unknown export format 'icq'"):
        read_export(odd, format="icq")
    with pytest.raises(ValueError, match=r"unknown time zone 'Mars/Olympus'"):
        read_export(odd, format="whatsapp", tz="Mars/Olympus")
    assert issubclass(ExportFormatError, ValueError)


def test_single_file_progress_and_forced_format(tmp_path):
    path = writers.discord(chat(3), tmp_path, tz=TZ)
    progress = []
    [conversation] = list(read_export(path, format="discord", on_progress=lambda *p: progress.append(p)))
    assert progress == [(1, 1, conversation.title)]


@pytest.mark.parametrize("name", ["general", "Family 🎉", "a/b\\c, d", "..", "", "Ünïcødé chat", "x" * 300])
def test_conversation_keys_are_valid_distinct_and_stable(name):
    key = conversation_key("whatsapp", name)
    assert validate_partition_key(key) == key
    assert key == conversation_key("whatsapp", name)
    assert len(key) <= 128


def test_conversation_keys_are_a_slug_of_the_chats_own_name():
    assert [conversation_key("whatsapp", n) for n in ("Family Trip", "Family 🎉 Trip!", "family_trip")] == [
        "whatsapp_family_trip"
    ] * 3
    assert conversation_key("slack", "trip-planning") == "slack_trip-planning"
    # Nothing readable left: a short hash of the exact name, different per name.
    assert conversation_key("telegram", "🎉") != conversation_key("telegram", "🎄")
    assert conversation_key("telegram", "🎉").startswith("telegram_h")
