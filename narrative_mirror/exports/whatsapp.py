"""WhatsApp "Export chat": Android ``WhatsApp Chat with X.txt``, iOS ``_chat.txt``, or a zip of either.

Facts: no message ids and no zone (times are the phone's local time); a message starts with a
header, Android ``12/9/20, 23:55 - Bob: hi`` / ``6/13/23, 7:35 PM - ``, iOS ``[31/12/2022,
11:40:26] Bob: hi`` (newer iOS puts U+202F before AM/PM and U+200E before attachment and system
lines). Lines without a header continue the previous message. Day/month order is the phone's
locale: inferred from the file (a first field over 12 is a day, a second field over 12 is a day)
or given by the caller. System lines have no author on Android; iOS attributes them to the chat
name and starts their text with U+200E. Media is a placeholder (``<Media omitted>``,
``IMG-...jpg (file attached)``, ``<attached: ...>``, ``image omitted``, translated); an edit is
only a trailing ``<This message was edited>``. There are no replies.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from narrative_mirror.exports.archive import ExportTree, base_of
from narrative_mirror.exports.limits import decode_text, open_file, sniff_text
from narrative_mirror.exports.records import (
    Attachment,
    Conversation,
    ExportedMessage,
    ExportFormatError,
    StableIds,
    conversation_from_messages,
    conversation_key,
    kind_from_name,
)
from narrative_mirror.exports.timezones import ZoneChoice

FORMAT = "whatsapp"
LRM = "\u200e"
_MARKS = "\u200e\u200f\u202a\u202c"
_SPACES = " \u202f\u00a0"

HEADER = re.compile(
    rf"^[{_MARKS}]*(?P<open>\[)?"
    r"(?P<date>\d{1,4}[./-]\d{1,2}[./-]\d{1,4})\.?,?[ \u202f\u00a0]"
    r"(?P<time>\d{1,2}[:.]\d{2}(?:[:.]\d{2})?)"
    rf"(?:[{_SPACES}]?(?P<ampm>[AaPp]\.?[{_SPACES}]?[Mm]\.?))?"
    rf"(?(open)\][{_SPACES}]|[{_SPACES}][-\u2013][{_SPACES}])"
    r"(?P<body>.*)$"
)

MEDIA_OMITTED = {
    "<Media omitted>",
    "<Médias omis>",
    "<Medien ausgeschlossen>",
    "<Multimedia omitido>",
    "<Mídia oculta>",
    "<Media weggelaten>",
    "<Media omessi>",
    "<Медиа отсутствуют>",
    "<Medya dahil edilmedi>",
    "<Media tidak disertakan>",
}
_OMITTED_KINDS = {
    "image": "photo",
    "video": "video",
    "audio": "audio",
    "sticker": "sticker",
    "GIF": "gif",
    "document": "document",
    "Contact card": "contact",
    "imagen": "photo",
    "Bild": "photo",
    "audio omitido": "audio",
    "vidéo": "video",
}
OMITTED = re.compile(
    r"^(?P<what>image|video|audio|sticker|GIF|document|Contact card) omitted$"
    r"|^(?P<es>imagen|video|audio|sticker|documento) omitid[oa]$"
    r"|^(?P<de>Bild|Video|Audio|Sticker|Dokument) weggelassen$"
)
# iOS shares a document as "Site rules.pdf • 3 pages <attached: 00000041-Site rules.pdf>"
DOCUMENT = re.compile(r"^(?P<shown>\S.*?\s+•\s+.+?)\s*<attached: (?P<name>.+)>$")
ATTACHED = re.compile(r"^<(?:attached|Anhang|adjunto|pièce jointe|allegato|anexo)\s?: (?P<name>.+)>$")
FILE_ATTACHED = re.compile(
    r"^(?P<name>\S.*?) \((?:file attached|Datei angehängt|archivo adjunto|fichier joint|"
    r"file allegato|arquivo anexado|bestand bijgevoegd)\)$"
)
EDITED_MARKS = (
    "<This message was edited>",
    "<Se editó este mensaje.>",
    "<Diese Nachricht wurde bearbeitet>",
    "<Ce message a été modifié>",
    "<Questo messaggio è stato modificato>",
    "<Esta mensagem foi editada>",
)
# A contact not in the exporter's address book: "~ Megan" (iOS puts U+202F after the tilde).
_UNSAVED = re.compile(r"^~[\s\u202f\u00a0]*")
# A shared location: "Location: https://maps.google.com/?q=51.37,-2.35" (iOS), "location: ..." (Android).
LOCATION = re.compile(r"^(?:live )?location(?: shared)?: https?://\S+$", re.I)
# Whole-message texts WhatsApp writes in an author's name that are no words of theirs: a deleted
# message (kept as a system line saying so) and calls (English, German, Spanish).
DELETED_TEXTS = frozenset(
    {
        "This message was deleted",
        "You deleted this message",
        "Diese Nachricht wurde gelöscht",
        "Du hast diese Nachricht gelöscht",
        "Se eliminó este mensaje",
        "Eliminaste este mensaje",
    }
)
CALL_TEXTS = frozenset(
    {
        "Missed voice call",
        "Missed video call",
        "Missed group voice call",
        "Missed group video call",
        "Voice call",
        "Video call",
        "Verpasster Sprachanruf",
        "Verpasster Videoanruf",
        "Sprachanruf",
        "Videoanruf",
        "Llamada perdida",
        "Llamada de voz perdida",
        "Videollamada perdida",
        "Llamada de voz",
        "Videollamada",
    }
)
_TITLE_PREFIXES = ("WhatsApp Chat with ", "WhatsApp Chat - ", "WhatsApp-Chat mit ", "Chat de WhatsApp con ")


@dataclass
class _Header:
    line: int
    fields: tuple[str, str, str]
    date_text: str
    clock: str
    ampm: str | None
    body: list[str]
    ios: bool


def read(path: Path, zone: ZoneChoice, day_first: bool | None) -> Iterator[Conversation]:
    """One conversation from a WhatsApp text export (or the zip holding it)."""
    text, label, title = _load(path)
    yield parse_chat(text, label=label, title=title, zone=zone, day_first=day_first)


def looks_like(first_lines: list[str]) -> bool:
    return any(HEADER.match(line) for line in first_lines[:5] if line.strip())


def chat_title(file_name: str) -> str:
    stem = file_name.rsplit(".", 1)[0] if "." in file_name else file_name
    for prefix in _TITLE_PREFIXES:
        if stem.startswith(prefix):
            return stem[len(prefix) :].strip()
    return stem.strip()


def _load(path: Path) -> tuple[str, str, str]:
    if path.suffix.lower() != ".zip":
        title = chat_title(path.parent.name if path.name == "_chat.txt" else path.name)
        with open_file(path) as handle:
            return decode_text(handle, str(path)), str(path), title
    tree = ExportTree(path)
    try:
        chosen = find_chat_in_zip(tree)
        if chosen is None:
            texts = [n for n in tree.names() if n.lower().endswith(".txt")]
            raise ExportFormatError(path, None, f"expected one WhatsApp chat .txt in the zip, found {texts or 'none'}")
        named_by = path.name if base_of(chosen) == "_chat.txt" else base_of(chosen)
        return tree.read_text(chosen), tree.label(chosen), chat_title(named_by)
    finally:
        tree.close()


def _first_lines(tree: ExportTree, name: str) -> list[str]:
    with tree.open(name) as handle:
        head = sniff_text(handle.read(4096), tree.label(name)).lstrip("\ufeff")
    return head.splitlines()[:5]


def find_chat_in_zip(tree: ExportTree) -> str | None:
    """The member that is the chat text of a WhatsApp zip, if exactly one is."""
    texts = [n for n in tree.names() if n.lower().endswith(".txt")]
    chosen = (
        [n for n in texts if base_of(n) == "_chat.txt"]
        or [n for n in texts if base_of(n).startswith(_TITLE_PREFIXES)]
        or [n for n in texts if looks_like(_first_lines(tree, n))]
    )
    return chosen[0] if len(chosen) == 1 else None


def parse_chat(text: str, *, label: str, title: str, zone: ZoneChoice, day_first: bool | None) -> Conversation:
    """Parse the text of one export; ``label`` names it in errors."""
    headers = _split(text, label)
    order = _date_order(headers, label, day_first)
    tzinfo = zone.require(label)
    authors = {_split_author(h.body[0], None)[0] for h in headers} - {None}
    ids = StableIds()
    messages = []
    utc = None
    for header in headers:
        local = _local_time(header, order, label)
        utc = zone.to_utc(local, label, after=utc)
        author, first = _split_author(header.body[0], authors)
        lines = [first, *header.body[1:]]
        messages.append(_message(author, lines, header.ios, title, utc, ids, tzinfo.key, zone.source))
    return conversation_from_messages(
        key=conversation_key(FORMAT, title),
        title=title,
        source_format=FORMAT,
        source=label,
        messages=messages,
        tz=zone.name,
        tz_source=zone.source,
    )


def _split(text: str, label: str) -> list[_Header]:
    headers: list[_Header] = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = HEADER.match(line)
        if match is None:
            if not headers:
                if not line.strip():
                    continue
                raise ExportFormatError(label, number, "not a WhatsApp message header (date, time, author)")
            headers[-1].body.append(line)
            continue
        date_text = match["date"]
        fields = tuple(re.split(r"[./-]", date_text))
        headers.append(
            _Header(
                number,
                fields,
                date_text,
                match["time"],
                match["ampm"],  # type: ignore[arg-type]
                [match["body"]],
                match["open"] is not None,
            )
        )
    if not headers:
        raise ExportFormatError(label, None, "no WhatsApp messages found")
    return headers


def _date_order(headers: list[_Header], label: str, day_first: bool | None) -> str:
    """``ymd``, ``dmy`` or ``mdy`` for the whole file."""
    if len(headers[0].fields[0]) == 4:
        return "ymd"
    first_over = next((h for h in headers if int(h.fields[0]) > 12), None)
    second_over = next((h for h in headers if int(h.fields[1]) > 12), None)
    both = next((h for h in headers if int(h.fields[0]) > 12 and int(h.fields[1]) > 12), None)
    if both is not None:
        raise ExportFormatError(label, both.line, f"date {both.date_text} has no month (both fields over 12)")
    if first_over is not None and second_over is not None:
        raise ExportFormatError(
            label,
            second_over.line,
            f"date {second_over.date_text} is month-first but line {first_over.line} "
            f"({first_over.date_text}) is day-first",
        )
    contradiction = second_over if day_first else first_over
    if day_first is not None and contradiction is not None:
        given = "--day-first" if day_first else "--month-first"
        raise ExportFormatError(
            label, contradiction.line, f"date {contradiction.date_text} cannot be read with {given}"
        )
    if day_first is not None:
        return "dmy" if day_first else "mdy"
    if first_over is not None:
        return "dmy"
    if second_over is not None:
        return "mdy"
    differing = next((h for h in headers if h.fields[0] != h.fields[1]), None)
    if differing is None:
        return "dmy"  # every date reads the same either way
    a, b, year = (int(f) for f in differing.fields)
    year = _full_year(year)
    raise ExportFormatError(
        label,
        differing.line,
        f"{differing.date_text} could be {a} {_MONTHS[b - 1]} or {b} {_MONTHS[a - 1]} {year}; "
        "pass --day-first or --month-first",
    )


_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def _full_year(year: int) -> int:
    return 2000 + year if year < 100 else year


def _local_time(header: _Header, order: str, label: str) -> datetime:
    first, second, third = (int(f) for f in header.fields)
    if order == "ymd":
        year, month, day = first, second, third
    elif order == "dmy":
        day, month, year = first, second, third
    else:
        month, day, year = first, second, third
    parts = [int(p) for p in re.split(r"[:.]", header.clock)]
    hour, minute, second_ = parts[0], parts[1], parts[2] if len(parts) > 2 else 0
    if header.ampm is not None:
        pm = header.ampm.strip().lower().startswith("p")
        if hour > 12:
            raise ExportFormatError(label, header.line, f"hour {hour} with {header.ampm!r}")
        hour = hour % 12 + (12 if pm else 0)
    try:
        return datetime(_full_year(year), month, day, hour, minute, second_)
    except ValueError as exc:
        raise ExportFormatError(
            label, header.line, f"bad date or time {header.date_text} {header.clock}: {exc}"
        ) from exc


def _split_author(body: str, known: set[str | None] | None) -> tuple[str | None, str]:
    """(author, first line of text); author None for an Android system line."""
    name, sep, rest = body.partition(": ")
    name = _UNSAVED.sub("", name.strip(_MARKS))
    if sep and name:
        return name, rest
    # "Bob:" with nothing (or no space) after the colon: a message only when Bob writes elsewhere.
    if ":" in body and known is not None:
        name, _, rest = body.partition(":")
        if name in known:
            return name, rest
    return None, body


def _message(
    author: str | None, lines: list[str], ios: bool, title: str, utc: datetime, ids: StableIds, tz: str, tz_source: str
) -> ExportedMessage:
    system = author is None
    if ios and lines[0].startswith(LRM) and not _attachment(lines[0].lstrip(_MARKS), lines[1:]):
        system = True
    lines = [lines[0].lstrip(_MARKS), *lines[1:]]
    text = "\n".join(lines)
    edited = False
    for mark in EDITED_MARKS:
        if text.endswith(mark):
            text, edited = text[: -len(mark)].rstrip(" \u200e"), True
            break
    attachments: tuple[Attachment, ...] = ()
    found = _attachment(text.split("\n", 1)[0], text.split("\n")[1:])
    if found is not None:
        attachments, text = (found[0],), found[1]
    theirs = text.strip().rstrip(".") in DELETED_TEXTS or text.strip() in CALL_TEXTS
    if theirs:
        system = True
    if system:  # "~ Megan joined using this group's invite link": Megan, as her messages name her
        text = _UNSAVED.sub("", text)
    # iOS gives its own lines the chat's name, dropped here; but a one-to-one chat is named after
    # the other person, and a deletion or a call in that name is theirs (on Android as on iOS).
    name = "" if author is None or (system and not theirs and author == title) else author
    return ExportedMessage(
        local_id=ids.next_id(name, utc, text),
        author=name,
        timestamp=utc,
        tz=tz,
        tz_source=tz_source,
        text=text,
        attachments=attachments,
        edited=edited,
        system=system,
    )


def _attachment(first: str, rest: list[str]) -> tuple[Attachment, str] | None:
    """(attachment, remaining text) when the message is a media placeholder, else None. A shared
    location keeps its line as text: its map link is what the person said."""
    first = first.strip(_MARKS)
    caption = "\n".join(rest) if rest else None
    if LOCATION.match(first):
        return Attachment("location", "", None), "\n".join([first, *rest])
    if first in MEDIA_OMITTED:
        return Attachment("media", "", caption), caption or ""
    if (match := OMITTED.match(first)) is not None:
        word = match["what"] or match["es"] or match["de"]
        return Attachment(_OMITTED_KINDS.get(word, word.lower()), "", caption), caption or ""
    if (match := ATTACHED.match(first)) is not None:
        name = match["name"].strip()
        return Attachment(kind_from_name(name), name, caption), caption or ""
    if (match := FILE_ATTACHED.match(first)) is not None:
        name = match["name"].strip(_MARKS)
        return Attachment(kind_from_name(name), name, caption), caption or ""
    if (match := DOCUMENT.match(first.replace(LRM, ""))) is not None:
        # the document's title as the chat shows it ("Site rules 2026.pdf • 3 pages")
        name = match["name"].strip()
        return Attachment(kind_from_name(name), name, caption), "\n".join([match["shown"], *rest])
    return None
