"""Signal: signal-export's ``data.json`` (one JSON object per line) or the text layout
``[YYYY-MM-DD, HH:MM] Name: text``.

Facts: no message ids; ``date`` is local time without a zone; ``sender``, ``body``,
``attachments`` (listed by file); ``quote`` is the quoted message's text, not an id, so a reply
link is made only when exactly one earlier message has that text. signal-export pads every body
with two spaces (markdown line breaks) and writes a quote as markdown (``"\n\n> text\n\n"``); a
sticker is its emoji; ``reactions`` are ``[name, emoji]`` pairs (the text layout puts a line
``(- Name: 👍, Name: 😂 -)`` after the words); a ``deleted`` row is the system line "This message
was deleted". A row with no text, sticker or file (a group update) is a system line, and so is a
call, which it writes as text ("Outgoing voice call (accepted, 18m 5s)", "Missed video call").
Rows come in sending order, so a time in the hour that repeats when clocks go back is placed in
the pass that keeps that order. In the text layout, lines without a header continue the previous
message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from narrative_mirror.exports.limits import decode_text, open_file
from narrative_mirror.exports.records import (
    Attachment,
    Conversation,
    ExportedMessage,
    ExportFormatError,
    StableIds,
    conversation_from_messages,
    conversation_key,
    json_field,
    kind_from_name,
    read_each,
)
from narrative_mirror.exports.timezones import ZoneChoice
from narrative_mirror.reactions import Reaction, reactions_of

FORMAT = "signal"
TEXT_HEADER = re.compile(r"^\[(?P<date>\d{4}-\d{2}-\d{2}), (?P<time>\d{1,2}:\d{2}(?::\d{2})?)\] (?P<body>.*)$")
JSON_KEYS = {"date", "sender", "body"}
_DATE_FORMATS = (
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%dT%H:%M:%S.%f",
    "%Y-%m-%d %H:%M:%S.%f",
    "%Y-%m-%d, %H:%M",
    "%Y-%m-%d, %H:%M:%S",
)
_AMBIGUOUS = ""


def looks_like_text(first_lines: list[str]) -> bool:
    return bool(first_lines) and TEXT_HEADER.match(first_lines[0].lstrip("\ufeff")) is not None


def looks_like_json_line(first_line: str) -> bool:
    try:
        value = json.loads(first_line)
    except ValueError:
        return False
    return isinstance(value, dict) and JSON_KEYS <= value.keys()


_CALL = re.compile(r"(?:Incoming|Outgoing|Missed) (?:voice|video) call(?: \([^)]*\))?")


def chat_title(path: Path) -> str:
    return path.parent.name if path.name == "data.json" and path.parent.name else path.stem


def read(path: Path, zone: ZoneChoice) -> Iterator[Conversation]:
    with open_file(path) as handle:
        text = decode_text(handle, str(path))
    first = next((line for line in text.splitlines() if line.strip()), "")
    in_json = looks_like_json_line(first)
    rows, parse = (_json_lines(text), _json_row) if in_json else (_text_rows(text, path), _text_row)
    title = chat_title(path)
    zone.require(path)
    ids = StableIds()
    by_text: dict[str, str] = {}
    previous: list[datetime] = []  # the last message's UTC time (rows come in sending order)

    def message(raw: Any, where: str) -> ExportedMessage:
        local, author, body, quote, attachments, reactions = parse(raw, path, where)
        utc = zone.to_utc(local, path, after=previous[-1] if previous else None)
        previous[:] = [utc]
        local_id = ids.next_id(author, utc, body)
        reply_to = by_text.get(quote.strip()) or None if quote else None
        key = body.strip()
        by_text[key] = _AMBIGUOUS if key in by_text else local_id
        return ExportedMessage(
            local_id=local_id,
            author=author,
            timestamp=utc,
            tz=zone.name,
            tz_source=zone.source,
            text=body,
            reply_to=reply_to,
            attachments=attachments,
            system=(not body.strip() and not attachments) or body == DELETED or bool(_CALL.fullmatch(body.strip())),
            reactions=reactions,
        )

    warnings: list[str] = []
    messages = read_each(rows, message, "chat", warnings, none_read_raises=True)
    conversation = conversation_from_messages(
        key=conversation_key(FORMAT, title),
        title=title,
        source_format=FORMAT,
        source=str(path),
        messages=messages,
        tz=zone.name,
        tz_source=zone.source,
    )
    conversation.warnings.extend(warnings)
    yield conversation


Row = tuple[datetime, str, str, str | None, tuple[Attachment, ...], tuple[Reaction, ...]]
DELETED = "This message was deleted"
# The text layout's reactions, a line of their own after the words: "(- Dev: 😂, Rob Hartley: 👍 -)".
_TEXT_REACTIONS = re.compile(r"\n\(- (?P<pairs>[^\n]*) -\)(?=\n|$)")


def _parse_date(value: str, path: Path, where: str | int) -> datetime:
    for pattern in _DATE_FORMATS:
        try:
            return datetime.strptime(value, pattern)
        except ValueError:
            continue
    raise ExportFormatError(path, where, f"bad date {value!r}")


def _json_lines(text: str) -> Iterator[tuple[str, str]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            yield f"line {number}", line


def _json_row(line: str, path: Path, where: str) -> Row:
    try:
        record: Any = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ExportFormatError(path, where, f"invalid JSON at column {exc.colno}: {exc.msg}") from exc
    date = json_field(record, "date", where, path, str)
    sender = json_field(record, "sender", where, path, str)
    body = record.get("body") or ""
    if not isinstance(body, str):
        raise ExportFormatError(path, f"{where}.body", f"expected str, found {body!r}")
    body = DELETED if record.get("deleted") is True else body.removesuffix("  ")
    sticker = record.get("sticker") or ""
    if isinstance(sticker, dict):  # signal-export's newer layout: {"id", "packId", "emoji", ...}
        sticker = sticker.get("emoji") or "sticker"
    quote = record.get("quote") or None
    if quote is not None and not isinstance(quote, str):
        raise ExportFormatError(path, f"{where}.quote", f"expected str, found {quote!r}")
    return (
        _parse_date(date, path, f"{where}.date"),
        sender,
        body,
        _unquoted(quote) if quote else None,
        _attachments(record.get("attachments") or [], path, where)
        + ((Attachment("sticker", "", sticker),) if isinstance(sticker, str) and sticker else ()),
        reactions_of(
            (str(pair[0]), str(pair[1]))
            for pair in (record.get("reactions") if isinstance(record.get("reactions"), list) else [])
            if isinstance(pair, list) and len(pair) == 2
        ),
    )


def _unquoted(quote: str) -> str:
    """The quoted text of a quote written as markdown ("> line" per line) or plainly."""
    lines = quote.strip("\n").split("\n")
    return "\n".join(line[2:] if line.startswith("> ") else line.removeprefix(">") for line in lines)


def _attachments(items: Any, path: Path, where: str) -> tuple[Attachment, ...]:
    if not isinstance(items, list):
        raise ExportFormatError(path, f"{where}.attachments", "expected an array")
    found = []
    for index, item in enumerate(items):
        if isinstance(item, str):
            name = item
        elif isinstance(item, dict):
            name = str(item.get("name") or item.get("fileName") or item.get("path") or "")
        else:
            raise ExportFormatError(path, f"{where}.attachments[{index}]", f"unexpected {item!r}")
        name = name.rsplit("/", 1)[-1]
        found.append(Attachment(kind_from_name(name), name, None))
    return tuple(found)


def _text_rows(text: str, path: Path) -> Iterator[tuple[str, list[str]]]:
    """``(where, [date, time, first line and its continuation lines])`` per message header."""
    current: tuple[str, list[str]] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = TEXT_HEADER.match(line.lstrip("\ufeff") if number == 1 else line)
        if match is None:
            if current is None:
                if not line.strip():
                    continue
                raise ExportFormatError(path, number, "not a Signal message header ([YYYY-MM-DD, HH:MM] Name: text)")
            current[1][2] += "\n" + line
            continue
        if current is not None:
            yield current
        current = (f"line {number}", [match["date"], match["time"], match["body"]])
    if current is None:
        raise ExportFormatError(path, None, "no Signal messages found")
    yield current


def _text_row(fields: list[str], path: Path, where: str) -> Row:
    date, time, text = fields
    author, sep, body = text.partition(": ")
    if not sep:
        raise ExportFormatError(path, where, "no 'Name: ' after the date")
    pairs = ()
    if found := _TEXT_REACTIONS.search(body):
        body = body[: found.start()] + body[found.end() :]
        pairs = (pair.rpartition(": ")[::2] for pair in found["pairs"].split(", "))
    return _parse_date(f"{date} {time}", path, where), author, body, None, (), reactions_of(pairs)
