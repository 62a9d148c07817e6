"""WhatsApp text exports written by hand: Android 12h/24h, iOS with U+202F/U+200E, zips, day order."""

from __future__ import annotations

import zipfile
from datetime import UTC, datetime

import pytest

from narrative_mirror.exports import Attachment, ExportFormatError, detect, read_export
from narrative_mirror.keys import validate_partition_key

LRM, NNBSP = "\u200e", "\u202f"


def _read(path, **kwargs):
    [conversation] = list(read_export(path, **kwargs))
    return conversation, list(conversation.messages())


def _utc(*parts):
    return datetime(*parts, tzinfo=UTC)


def test_android_12h_media_captions_edits_and_system_lines(tmp_path):
    path = tmp_path / "WhatsApp Chat with Bob.txt"
    path.write_text(
        "6/13/23, 7:35 PM - Messages and calls are end-to-end encrypted. No one outside of this chat can read them.\n"
        "6/13/23, 7:35 PM - Ann: hi Bob\n"
        "how are you?\n"
        "\n"
        "6/13/23, 7:36 PM - Bob: <Media omitted>\n"
        "6/13/23, 12:05 AM - Bob: IMG-20230613-WA0001.jpg (file attached)\n"
        "look at this\n"
        "6/14/23, 12:01 PM - Ann: fine thanks <This message was edited>\n"
        '6/14/23, 12:02 PM - Ann created group "Trip"\n',
        encoding="utf-8",
    )
    assert detect(path) == "whatsapp"
    conversation, messages = _read(path, tz="UTC")
    assert conversation.title == "Bob" and conversation.key == "whatsapp_bob"
    assert [(m.author, m.timestamp, m.text, m.system, m.edited) for m in messages] == [
        (
            "",
            _utc(2023, 6, 13, 19, 35),
            "Messages and calls are end-to-end encrypted. No one outside of this chat can read them.",
            True,
            False,
        ),
        ("Ann", _utc(2023, 6, 13, 19, 35), "hi Bob\nhow are you?\n", False, False),
        ("Bob", _utc(2023, 6, 13, 19, 36), "", False, False),
        ("Bob", _utc(2023, 6, 13, 0, 5), "look at this", False, False),
        ("Ann", _utc(2023, 6, 14, 12, 1), "fine thanks", False, True),
        ("", _utc(2023, 6, 14, 12, 2), 'Ann created group "Trip"', True, False),
    ]
    assert messages[2].attachments == (Attachment("media", "", None),)
    assert messages[3].attachments == (Attachment("photo", "IMG-20230613-WA0001.jpg", "look at this"),)
    assert conversation.participants == ("Ann", "Bob")


def test_android_24h_day_first(tmp_path):
    path = tmp_path / "WhatsApp Chat with Team.txt"
    path.write_text("12/9/20, 23:55 - Bob: hi\n13/9/20, 00:01 - Ann: hello\n", encoding="utf-8")
    _, messages = _read(path, tz="Europe/London")
    assert [(m.author, m.timestamp) for m in messages] == [
        ("Bob", _utc(2020, 9, 12, 22, 55)),
        ("Ann", _utc(2020, 9, 12, 23, 1)),
    ]


def test_ios_with_narrow_space_and_left_to_right_marks(tmp_path):
    chat = (
        f"[5/8/23, 1:56:00{NNBSP}PM] Family: {LRM}Messages and calls are end-to-end encrypted.\n"
        f"[5/8/23, 1:57:10{NNBSP}PM] Ann: hello\n"
        f"{LRM}[5/8/23, 1:58:00{NNBSP}PM] Bob: {LRM}<attached: 00000012-PHOTO-2023-05-08-13-58-00.jpg>\n"
        f"[5/8/23, 2:01:00{NNBSP}PM] Bob: {LRM}image omitted\n"
        f"[5/13/23, 9:02:03{NNBSP}AM] Ann: see you {LRM}<This message was edited>\n"
        f"[5/13/23, 9:03:00{NNBSP}AM] Family: {LRM}Ann added Cy\n"
        f"[5/13/23, 9:04:00{NNBSP}AM] Bob: {LRM}This message was deleted.\n"
    )
    path = tmp_path / "WhatsApp Chat - Family.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("_chat.txt", chat)
        archive.writestr("00000012-PHOTO-2023-05-08-13-58-00.jpg", b"\xff\xd8")
    assert detect(path) == "whatsapp"
    conversation, messages = _read(path, tz="America/New_York")
    assert conversation.title == "Family" and conversation.key == "whatsapp_family"
    assert [(m.author, m.timestamp, m.text, m.system, m.edited) for m in messages] == [
        ("", _utc(2023, 5, 8, 17, 56), "Messages and calls are end-to-end encrypted.", True, False),
        ("Ann", _utc(2023, 5, 8, 17, 57, 10), "hello", False, False),
        ("Bob", _utc(2023, 5, 8, 17, 58), "", False, False),
        ("Bob", _utc(2023, 5, 8, 18, 1), "", False, False),
        ("Ann", _utc(2023, 5, 13, 13, 2, 3), "see you", False, True),
        ("", _utc(2023, 5, 13, 13, 3), "Ann added Cy", True, False),
        ("Bob", _utc(2023, 5, 13, 13, 4), "This message was deleted.", True, False),
    ]
    assert messages[2].attachments == (Attachment("photo", "00000012-PHOTO-2023-05-08-13-58-00.jpg", None),)
    assert messages[3].attachments == (Attachment("photo", "", None),)
    assert conversation.participants == ("Ann", "Bob")
    assert conversation.source.endswith("WhatsApp Chat - Family.zip!_chat.txt")


def test_ios_unsaved_contact_shared_location_and_document_are_messages_of_their_person(tmp_path):
    # Someone not in the exporter's contacts is "~ Megan" (tilde, U+202F), in her messages and
    # in the line saying she joined; a shared location is a line of its own with a map link,
    # marked like an attachment; a document line starts with U+200E like a system line.
    path = tmp_path / "WhatsApp Chat - Hen do.txt"
    path.write_text(
        f"[02/06/2026, 22:31:10] Hen do: {LRM}~{NNBSP}Megan joined using this group's invite link\r\n"
        f"[03/06/2026, 09:20:02] ~{NNBSP}Megan: sent x\r\n"
        f"{LRM}[15/06/2026, 12:15:30] Amira: {LRM}Location: https://maps.google.com/?q=51.376452,-2.353910\r\n"
        "[15/06/2026, 12:16:00] Amira: that's the pub\r\n"
        f"{LRM}[15/06/2026, 12:17:00] Amira: {LRM}House rules.pdf • {LRM}3 pages {LRM}<attached: 00000041-House rules.pdf>\r\n",
        encoding="utf-8",
    )
    _, messages = _read(path, tz="Europe/London")
    assert [(m.author, m.text, m.system) for m in messages] == [
        ("", "Megan joined using this group's invite link", True),
        ("Megan", "sent x", False),
        ("Amira", "Location: https://maps.google.com/?q=51.376452,-2.353910", False),
        ("Amira", "that's the pub", False),
        ("Amira", "House rules.pdf • 3 pages", False),  # a document, by its title
    ]
    assert messages[2].attachments == (Attachment("location", "", None),)
    assert messages[4].attachments == (Attachment("document", "00000041-House rules.pdf", None),)


def test_ios_24h_with_seconds_day_first(tmp_path):
    folder = tmp_path / "WhatsApp Chat - Ski"
    folder.mkdir()
    (folder / "_chat.txt").write_text(
        "[31/12/2022, 11:40:26] Bob: hi\n[01/01/2023, 00:00:01] Ann: happy new year\n", encoding="utf-8"
    )
    conversation, messages = _read(folder, tz="Europe/Berlin")
    assert conversation.title == "Ski"
    assert [m.timestamp for m in messages] == [_utc(2022, 12, 31, 10, 40, 26), _utc(2022, 12, 31, 23, 0, 1)]


def test_ambiguous_day_order_names_both_readings(tmp_path):
    path = tmp_path / "chat.txt"
    path.write_text("3/3/24, 10:00 - Ann: a\n3/4/24, 10:00 - Bob: b\n", encoding="utf-8")
    with pytest.raises(ExportFormatError) as caught:
        list(read_export(path, tz="UTC"))
    assert str(caught.value) == (
        f"{path}: line 2: 3/4/24 could be 3 April or 4 March 2024; pass --day-first or --month-first"
    )
    _, day_first = _read(path, tz="UTC", day_first=True)
    _, month_first = _read(path, tz="UTC", day_first=False)
    assert day_first[1].timestamp == _utc(2024, 4, 3, 10)
    assert month_first[1].timestamp == _utc(2024, 3, 4, 10)


def test_both_fields_over_twelve_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "chat.txt"
    path.write_text("1/2/24, 10:00 - Ann: a\n13/14/24, 10:00 - Bob: b\n", encoding="utf-8")
    with pytest.raises(ExportFormatError, match=r"chat.txt: line 2: date 13/14/24 has no month"):
        list(read_export(path, tz="UTC"))


def test_contradicting_orders_and_a_wrong_given_order_are_errors(tmp_path):
    path = tmp_path / "chat.txt"
    path.write_text("13/1/24, 10:00 - Ann: a\n1/14/24, 10:00 - Bob: b\n", encoding="utf-8")
    with pytest.raises(
        ExportFormatError, match=r"line 2: date 1/14/24 is month-first but line 1 \(13/1/24\) is day-first"
    ):
        list(read_export(path, tz="UTC"))
    path.write_text("13/1/24, 10:00 - Ann: a\n", encoding="utf-8")
    with pytest.raises(ExportFormatError, match=r"line 1: date 13/1/24 cannot be read with --month-first"):
        list(read_export(path, tz="UTC", day_first=False))


def test_bad_first_line_and_bad_time_name_the_line(tmp_path):
    path = tmp_path / "chat.txt"
    path.write_text("1/2/24, 10:00 - Ann: a\n1/2/24, 25:00 - Bob: b\n", encoding="utf-8")
    with pytest.raises(ExportFormatError, match=r"chat.txt: line 2: bad date or time 1/2/24 25:00"):
        list(read_export(path, format="whatsapp", tz="UTC", day_first=True))
    path.write_text("hello there\n1/2/24, 10:00 - Ann: a\n", encoding="utf-8")
    with pytest.raises(ExportFormatError, match=r"chat.txt: line 1: not a WhatsApp message header"):
        list(read_export(path, format="whatsapp", tz="UTC", day_first=True))


def test_local_times_need_a_zone_and_record_where_it_came_from(tmp_path):
    path = tmp_path / "chat.txt"
    path.write_text("1/1/24, 10:00 - Ann: a\n", encoding="utf-8")
    with pytest.raises(ExportFormatError, match=r"chat.txt: the export has local times without a zone"):
        list(read_export(path))
    conversation, [message] = _read(path, machine_tz="Asia/Tokyo")
    assert (conversation.tz, conversation.tz_source) == ("Asia/Tokyo", "machine")
    assert (message.tz, message.tz_source, message.timestamp) == ("Asia/Tokyo", "machine", _utc(2024, 1, 1, 1))
    _, [given] = _read(path, tz="UTC", machine_tz="Asia/Tokyo")
    assert (given.tz, given.tz_source) == ("UTC", "--tz")


def test_dst_gap_and_overlap_are_resolved_deterministically(tmp_path):
    path = tmp_path / "chat.txt"
    # 31 March 2024 02:30 does not exist in Berlin; 27 October 2024 02:30 happens twice.
    path.write_text("31/3/24, 02:30 - Ann: gap\n27/10/24, 02:30 - Bob: overlap\n", encoding="utf-8")
    _, messages = _read(path, tz="Europe/Berlin")
    assert [m.timestamp for m in messages] == [_utc(2024, 3, 31, 1, 30), _utc(2024, 10, 27, 0, 30)]


def test_keys_are_safe_for_any_chat_name(tmp_path):
    path = tmp_path / "WhatsApp Chat with Família 🎉 a/b, c.txt".replace("/", "_")
    path.write_text("1/1/24, 10:00 - Ann: a\n", encoding="utf-8")
    conversation, _ = _read(path, tz="UTC")
    assert conversation.title == "Família 🎉 a_b, c"
    assert validate_partition_key(conversation.key) == conversation.key
    assert conversation.key == "whatsapp_familia_a_b_c"


def test_android_zip_with_media_and_a_localized_chat_name(tmp_path):
    path = tmp_path / "export.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(
            "WhatsApp-Chat mit Oma.txt",
            "24.12.23, 18:00 - Oma: Frohe Weihnachten\n"
            "24.12.23, 18:01 - Ann: DOC-20231224-WA0002.txt (Datei angehängt)\n",
        )
        archive.writestr("DOC-20231224-WA0002.txt", "a shared note, not the chat")
    assert detect(path) == "whatsapp"
    conversation, messages = _read(path, tz="Europe/Berlin")
    assert [(m.author, m.timestamp, m.text) for m in messages] == [
        ("Oma", _utc(2023, 12, 24, 17), "Frohe Weihnachten"),
        ("Ann", _utc(2023, 12, 24, 17, 1), ""),
    ]
    assert messages[1].attachments == (Attachment("document", "DOC-20231224-WA0002.txt", None),)
    assert conversation.source.endswith("export.zip!WhatsApp-Chat mit Oma.txt")
    assert (conversation.title, conversation.key) == ("Oma", "whatsapp_oma")


def test_android_sticker_file_is_a_sticker(tmp_path):
    path = tmp_path / "WhatsApp Chat with Pat.txt"
    path.write_text(
        "17/03/2026, 19:02 - Sue: STK-20260317-WA0004.webp (file attached)\n"
        "17/03/2026, 19:03 - Sue: IMG-20260317-WA0005.jpg (file attached)\n",
        encoding="utf-8",
    )
    _, messages = _read(path, tz="Europe/London")
    assert [m.attachments[0].kind for m in messages] == ["sticker", "photo"]


def test_a_time_in_the_repeated_hour_after_a_later_one_is_in_the_second_pass(tmp_path):
    # London's clocks go back at 02:00 on 25 Oct 2026: 01:37 BST, then 01:12 GMT, 35 minutes later.
    path = tmp_path / "WhatsApp Chat with Night owls.txt"
    path.write_text(
        "25/10/2026, 01:37 - Ann: still up?\n25/10/2026, 01:12 - Bob: yes, clocks went back\n"
        "25/10/2026, 01:20 - Ann: ha\n",
        encoding="utf-8",
    )
    [conversation] = list(read_export(path, tz="Europe/London"))
    assert [m.timestamp for m in conversation.messages()] == [
        datetime(2026, 10, 25, 0, 37, tzinfo=UTC),
        datetime(2026, 10, 25, 1, 12, tzinfo=UTC),
        datetime(2026, 10, 25, 1, 20, tzinfo=UTC),
    ]
