"""WhatsApp system lines, deleted messages, calls, edits and media, iOS and Android, in English,
German and Spanish: who, what, and whether it is a system line."""

from __future__ import annotations

import zipfile
from datetime import UTC, datetime

import pytest

from narrative_mirror.exports import Attachment, read_export

LRM = "\u200e"
IOS = f"""[12.03.24, 09:20:00] Family: {LRM}Messages and calls are end-to-end encrypted. No one outside of this chat, not even WhatsApp, can read or listen to them.
[12.03.24, 09:20:01] Ann: {LRM}Ann created group “Family”
[12.03.24, 09:20:02] Family: {LRM}Ann added Bob
[12.03.24, 09:21:00] Ann: {LRM}<attached: 00000012-PHOTO-2024-03-12-09-21-00.jpg>
[12.03.24, 09:22:00] Bob: {LRM}image omitted
[12.03.24, 09:23:00] Bob: see you at 5 {LRM}<This message was edited>
[12.03.24, 09:24:00] Bob: {LRM}This message was deleted.
[12.03.24, 09:25:00] Ann: {LRM}You deleted this message.
[12.03.24, 09:26:00] Bob: {LRM}Missed voice call
[12.03.24, 09:27:00] Family: {LRM}Bob left
[12.03.24, 09:28:00] Family: {LRM}Ann removed Cy
[12.03.24, 09:29:00] Family: {LRM}Ann changed the subject to “Fam”
"""
ANDROID = """12/03/2024, 09:20 - Messages and calls are end-to-end encrypted. No one outside of this chat, not even WhatsApp, can read or listen to them. Tap to learn more.
12/03/2024, 09:20 - Ann created group "Family"
12/03/2024, 09:20 - Ann added Bob
12/03/2024, 09:21 - Ann: IMG-20240312-WA0001.jpg (file attached)
the view
12/03/2024, 09:22 - Bob: <Media omitted>
12/03/2024, 09:23 - Bob: see you at 5 <This message was edited>
12/03/2024, 09:24 - Bob: This message was deleted
12/03/2024, 09:25 - Ann: You deleted this message
12/03/2024, 09:26 - Bob: Missed voice call
12/03/2024, 09:27 - Bob left
12/03/2024, 09:28 - Ann removed Cy
12/03/2024, 09:29 - Ann changed the subject from "Family" to "Fam"
"""
GERMAN = """12.03.24, 09:20 - Nachrichten und Anrufe sind Ende-zu-Ende-verschlüsselt. Tippe, um mehr zu erfahren.
12.03.24, 09:20 - Ann hat die Gruppe „Familie“ erstellt.
12.03.24, 09:20 - Ann hat Bob hinzugefügt.
12.03.24, 09:21 - Ann: IMG-20240312-WA0001.jpg (Datei angehängt)
12.03.24, 09:23 - Bob: bis 5 <Diese Nachricht wurde bearbeitet>
12.03.24, 09:24 - Bob: Diese Nachricht wurde gelöscht.
12.03.24, 09:25 - Ann: Du hast diese Nachricht gelöscht.
12.03.24, 09:26 - Bob: Verpasster Sprachanruf
12.03.24, 09:27 - Bob hat die Gruppe verlassen.
"""
SPANISH = """12/03/2024, 9:20 a. m. - Ann creó el grupo "Familia"
12/03/2024, 9:21 a. m. - Ann: <Multimedia omitido>
12/03/2024, 9:22 a. m. - Bob: hasta las 5 <Se editó este mensaje.>
12/03/2024, 1:24 p. m. - Bob: Se eliminó este mensaje.
12/03/2024, 1:25 p. m. - Ann: Eliminaste este mensaje.
12/03/2024, 1:26 p. m. - Bob: Llamada perdida
12/03/2024, 1:27 p. m. - Bob salió del grupo
"""


def _rows(path, **kwargs):
    [chat] = read_export(path, tz="Europe/Berlin", day_first=True, **kwargs)
    return chat, [(m.author, m.text, m.system, m.edited, m.attachments) for m in chat.messages()]


def test_ios_zip(tmp_path):
    archive = tmp_path / "WhatsApp Chat - Family.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("_chat.txt", IOS)
    chat, rows = _rows(archive)
    photo = (Attachment("photo", "00000012-PHOTO-2024-03-12-09-21-00.jpg", None),)
    assert rows == [
        (
            "",
            "Messages and calls are end-to-end encrypted. No one outside of this chat, not even WhatsApp, "
            "can read or listen to them.",
            True,
            False,
            (),
        ),
        ("Ann", "Ann created group “Family”", True, False, ()),
        ("", "Ann added Bob", True, False, ()),
        ("Ann", "", False, False, photo),
        ("Bob", "", False, False, (Attachment("photo", "", None),)),
        ("Bob", "see you at 5", False, True, ()),
        ("Bob", "This message was deleted.", True, False, ()),
        ("Ann", "You deleted this message.", True, False, ()),
        ("Bob", "Missed voice call", True, False, ()),
        ("", "Bob left", True, False, ()),
        ("", "Ann removed Cy", True, False, ()),
        ("", "Ann changed the subject to “Fam”", True, False, ()),
    ]
    first = next(chat.messages())
    assert (first.timestamp, first.tz, first.tz_source) == (
        datetime(2024, 3, 12, 8, 20, tzinfo=UTC),
        "Europe/Berlin",
        "--tz",
    )
    assert chat.participants == ("Ann", "Bob")


def test_android_english(tmp_path):
    path = tmp_path / "WhatsApp Chat with Family.txt"
    path.write_text(ANDROID, encoding="utf-8")
    _, rows = _rows(path)
    assert rows == [
        (
            "",
            "Messages and calls are end-to-end encrypted. No one outside of this chat, not even WhatsApp, "
            "can read or listen to them. Tap to learn more.",
            True,
            False,
            (),
        ),
        ("", 'Ann created group "Family"', True, False, ()),
        ("", "Ann added Bob", True, False, ()),
        ("Ann", "the view", False, False, (Attachment("photo", "IMG-20240312-WA0001.jpg", "the view"),)),
        ("Bob", "", False, False, (Attachment("media", "", None),)),
        ("Bob", "see you at 5", False, True, ()),
        ("Bob", "This message was deleted", True, False, ()),
        ("Ann", "You deleted this message", True, False, ()),
        ("Bob", "Missed voice call", True, False, ()),
        ("", "Bob left", True, False, ()),
        ("", "Ann removed Cy", True, False, ()),
        ("", 'Ann changed the subject from "Family" to "Fam"', True, False, ()),
    ]


def test_android_german_and_spanish(tmp_path):
    german = tmp_path / "WhatsApp-Chat mit Familie.txt"
    german.write_text(GERMAN, encoding="utf-8")
    _, rows = _rows(german)
    assert [(author, text, system, edited) for author, text, system, edited, _ in rows] == [
        ("", "Nachrichten und Anrufe sind Ende-zu-Ende-verschlüsselt. Tippe, um mehr zu erfahren.", True, False),
        ("", "Ann hat die Gruppe „Familie“ erstellt.", True, False),
        ("", "Ann hat Bob hinzugefügt.", True, False),
        ("Ann", "", False, False),
        ("Bob", "bis 5", False, True),
        ("Bob", "Diese Nachricht wurde gelöscht.", True, False),
        ("Ann", "Du hast diese Nachricht gelöscht.", True, False),
        ("Bob", "Verpasster Sprachanruf", True, False),
        ("", "Bob hat die Gruppe verlassen.", True, False),
    ]
    assert rows[3][4] == (Attachment("photo", "IMG-20240312-WA0001.jpg", None),)
    spanish = tmp_path / "Chat de WhatsApp con Familia.txt"
    spanish.write_text(SPANISH, encoding="utf-8")
    chat, rows = _rows(spanish)
    assert rows == [
        ("", 'Ann creó el grupo "Familia"', True, False, ()),
        ("Ann", "", False, False, (Attachment("media", "", None),)),
        ("Bob", "hasta las 5", False, True, ()),
        ("Bob", "Se eliminó este mensaje.", True, False, ()),
        ("Ann", "Eliminaste este mensaje.", True, False, ()),
        ("Bob", "Llamada perdida", True, False, ()),
        ("", "Bob salió del grupo", True, False, ()),
    ]
    assert list(chat.messages())[3].timestamp == datetime(2024, 3, 12, 12, 24, tzinfo=UTC)
    assert chat.title == "Familia"


# A one-to-one chat is titled with the other person's name, the name iOS also gives its system
# lines: a message that person deleted, or their call, is still theirs, as the exporter's own are.
ONE_TO_ONE = {
    "en": (
        "WhatsApp Chat with Tom Whitfield.txt",
        "Messages and calls are end-to-end encrypted. No one outside of this chat, not even WhatsApp, "
        "can read or listen to them.",
        "Are we still on for Saturday?",
        "This message was deleted",
        "Sorry, wrong chat 🙈",
        "You deleted this message",
        "Missed voice call",
    ),
    "de": (
        "WhatsApp-Chat mit Tom Whitfield.txt",
        "Nachrichten und Anrufe sind Ende-zu-Ende-verschlüsselt. Niemand außerhalb dieses Chats kann sie lesen.",
        "Steht Samstag noch?",
        "Diese Nachricht wurde gelöscht",
        "Sorry, falscher Chat 🙈",
        "Du hast diese Nachricht gelöscht",
        "Verpasster Sprachanruf",
    ),
    "es": (
        "Chat de WhatsApp con Tom Whitfield.txt",
        "Los mensajes y las llamadas están cifrados de extremo a extremo. Nadie fuera de este chat puede leerlos.",
        "¿Sigue en pie lo del sábado?",
        "Se eliminó este mensaje",
        "Perdón, chat equivocado 🙈",
        "Eliminaste este mensaje",
        "Llamada perdida",
    ),
}


@pytest.mark.parametrize("language", sorted(ONE_TO_ONE))
def test_android_one_to_one_deletions_keep_who_deleted(tmp_path, language):
    name, encrypted, asked, deleted, sorry, mine, call = ONE_TO_ONE[language]
    path = tmp_path / name
    path.write_text(
        f"14/03/2026, 19:40 - {encrypted} Tap to learn more.\n"
        f"14/03/2026, 19:41 - Rosie Hale: {asked}\n"
        f"14/03/2026, 19:42 - Tom Whitfield: {deleted}\n"
        f"14/03/2026, 19:43 - Tom Whitfield: {sorry}\n"
        f"14/03/2026, 19:44 - Rosie Hale: {mine}\n"
        f"14/03/2026, 19:50 - Tom Whitfield: {call}\n",
        encoding="utf-8",
    )
    chat, rows = _rows(path)
    assert chat.title == "Tom Whitfield"
    assert [(author, text, system) for author, text, system, _, _ in rows] == [
        ("", f"{encrypted} Tap to learn more.", True),
        ("Rosie Hale", asked, False),
        ("Tom Whitfield", deleted, True),
        ("Tom Whitfield", sorry, False),
        ("Rosie Hale", mine, True),
        ("Tom Whitfield", call, True),
    ]


@pytest.mark.parametrize("language", sorted(ONE_TO_ONE))
def test_ios_one_to_one_deletions_keep_who_deleted(tmp_path, language):
    _, encrypted, asked, deleted, sorry, mine, call = ONE_TO_ONE[language]
    archive = tmp_path / "WhatsApp Chat - Tom Whitfield.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr(
            "_chat.txt",
            f"[14.03.26, 19:40:02] Tom Whitfield: {LRM}{encrypted}\n"
            f"[14.03.26, 19:41:15] Rosie Hale: {asked}\n"
            f"[14.03.26, 19:42:30] Tom Whitfield: {LRM}{deleted}.\n"
            f"[14.03.26, 19:43:05] Tom Whitfield: {sorry}\n"
            f"[14.03.26, 19:44:12] Rosie Hale: {LRM}{mine}.\n"
            f"[14.03.26, 19:50:40] Tom Whitfield: {LRM}{call}\n",
        )
    chat, rows = _rows(archive)
    assert chat.title == "Tom Whitfield"
    assert [(author, text, system) for author, text, system, _, _ in rows] == [
        ("", encrypted, True),  # iOS names the chat as the author of its own lines
        ("Rosie Hale", asked, False),
        ("Tom Whitfield", f"{deleted}.", True),
        ("Tom Whitfield", sorry, False),
        ("Rosie Hale", f"{mine}.", True),
        ("Tom Whitfield", call, True),
    ]
    assert chat.participants == ("Rosie Hale", "Tom Whitfield")
