"""Read one chat file (RealTalk or LoCoMo format) into the message record (schema.MESSAGE_RECORD).

Messages keep FILE order: sessions by their number N, then list order inside a session.
In RealTalk the ``D`` number of a ``dia_id`` is the day, not the session, so ids are never
used for ordering.

Normalizations applied (each one is recorded in ``Chat.notes`` when it happens):
- ``dia_id``: all whitespace removed ("D 2:18" -> "D2:18").
- Empty sessions are skipped.
- A text longer than ``MAX_TEXT_CHARS`` is truncated to that length, so one pasted document
  cannot dominate an index or a prompt.
- RealTalk images: most image messages list only ``img_file`` (local file names) and leave
  ``img_url`` empty; ``image_urls`` holds the URLs, else the file names, so every image
  message is recognizable. ``blip_caption`` (present on some RealTalk and LoCoMo image
  messages) becomes ``image_caption``.
- LoCoMo has one time per session; every message of the session gets it.
- Neither format has a zone, replies, edits or system lines: ``utc_time`` and ``reply_to`` are
  null, ``tz`` "", the flags false; images become photo attachments (caption: blip_caption).

Chat exports (WhatsApp, Telegram, ...) reach the same record through narrative_mirror/exports/frames.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import polars as pl

from narrative_mirror import schema

MAX_TEXT_CHARS = 20_000
REALTALK_TIME_FORMAT = "%d.%m.%Y, %H:%M:%S"
REALTALK_TIME_HINT = "DD.MM.YYYY, HH:MM:SS"
LOCOMO_TIME_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y")
LOCOMO_TIME_HINT = "like '1:56 pm on 8 May, 2023'"

_SESSION_KEY = re.compile(r"session_(\d+)")


class ChatFormatError(ValueError):
    """A chat file that cannot be read; the message names the file and the field."""


@dataclass
class Chat:
    chat_file: str
    path: Path
    format: str  # "realtalk", "locomo", "live" or an export format ("whatsapp", "slack", ...)
    speakers: list[str]
    messages: pl.DataFrame  # schema.MESSAGE_RECORD
    qa: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tz: str = ""  # the zone local times were read in, and how it was decided ("" for RealTalk/LoCoMo)
    tz_source: str = ""

    @property
    def local_ids(self) -> list[str]:
        return self.messages["local_id"].to_list()


def load_chat(path: Path, chat_file: str | None = None) -> Chat:
    """Read ``path``; ``chat_file`` (the partition key) defaults to the file stem."""
    path = Path(path)
    if path.name.endswith(".jsonl"):  # a live chat's log (narrative_mirror/live)
        from narrative_mirror.live.source import live_messages

        try:
            frame, speakers = live_messages(path, chat_file)
        except ValueError as exc:
            raise ChatFormatError(str(exc)) from None
        return Chat(frame["chat_file"][0], path, "live", speakers, frame)  # type: ignore[arg-type]
    chat_file = chat_file or path.stem
    data = read_json_file(path)
    where = path.name
    if isinstance(data, list):
        raise ChatFormatError(
            f"{where}: top level is a list of {len(data)} items; expected one chat object "
            "(RealTalk: session_N keys; LoCoMo: one sample with a 'conversation' object). "
            "Split a multi-sample LoCoMo file into one file per sample."
        )
    if not isinstance(data, dict):
        raise ChatFormatError(f"{where}: top level is {type(data).__name__}; expected a JSON object")

    if "conversation" in data:
        fmt: Literal["realtalk", "locomo"] = "locomo"
        body = data["conversation"]
        if not isinstance(body, dict):
            raise ChatFormatError(f"{where}: conversation is {type(body).__name__}; expected an object")
        names = [body.get("speaker_a"), body.get("speaker_b")]
        names_field = "conversation.speaker_a/speaker_b"
        prefix = "conversation."
    elif any(_SESSION_KEY.fullmatch(k) for k in data):
        fmt = "realtalk"
        body = data
        name = data.get("name", {})
        if not isinstance(name, dict):
            raise ChatFormatError(f"{where}: name is {type(name).__name__}; expected {{speaker_1, speaker_2}}")
        names = [name.get("speaker_1"), name.get("speaker_2")]
        names_field = "name.speaker_1/speaker_2"
        prefix = ""
    else:
        raise ChatFormatError(
            f"{where}: unknown chat format, top-level keys {sorted(data)[:8]}; expected RealTalk "
            "(top-level session_N message lists) or LoCoMo (a top-level 'conversation' object "
            "with session_N lists)"
        )

    for value in names:
        if value is not None and not isinstance(value, str):
            raise ChatFormatError(f"{where}: {names_field} must be strings, got {value!r}")

    sessions = sorted(
        ((int(m.group(1)), key) for key in body if (m := _SESSION_KEY.fullmatch(key))), key=lambda item: item[0]
    )
    if not sessions:
        raise ChatFormatError(f"{where}: {prefix}session_N keys missing; a chat needs at least one session")

    notes: list[str] = []
    rows: dict[str, list[Any]] = {column: [] for column in schema.MESSAGES}
    seen: dict[str, tuple[str, int]] = {}  # local_id -> (field, position) of its first use
    for number, key in sessions:
        messages = body[key]
        if not isinstance(messages, list):
            raise ChatFormatError(f"{where}: {prefix}{key} is {type(messages).__name__}; expected a list of messages")
        if not messages:
            notes.append(f"{prefix}{key}: empty session skipped")
            continue
        session_time = None
        if fmt == "locomo":
            session_time = _parse_time(
                body.get(f"{key}_date_time"), LOCOMO_TIME_FORMATS, LOCOMO_TIME_HINT, where, f"{prefix}{key}_date_time"
            )
        for index, message in enumerate(messages):
            field_name = f"{prefix}{key}[{index}]"
            if not isinstance(message, dict):
                raise ChatFormatError(f"{where}: {field_name} is {type(message).__name__}; expected an object")
            position = len(rows["position"])
            local_id = _text(message, "dia_id", where, field_name)
            local_id = re.sub(r"\s+", "", local_id)
            if not local_id:
                raise ChatFormatError(f"{where}: {field_name}.dia_id is empty")
            if local_id != message["dia_id"]:
                notes.append(f"{field_name}.dia_id {message['dia_id']!r} normalized to {local_id!r}")
            if local_id in seen:
                first_field, first_position = seen[local_id]
                raise ChatFormatError(
                    f"{where}: duplicate dia_id {local_id!r} at {first_field} (position {first_position}) "
                    f"and {field_name} (position {position})"
                )
            seen[local_id] = (field_name, position)

            text = _text(message, "clean_text" if fmt == "realtalk" else "text", where, field_name)
            if len(text) > MAX_TEXT_CHARS:
                notes.append(f"{field_name}.text truncated from {len(text)} to {MAX_TEXT_CHARS} characters")
                text = text[:MAX_TEXT_CHARS]

            if fmt == "realtalk":
                timestamp = _parse_time(
                    message.get("date_time"),
                    (REALTALK_TIME_FORMAT,),
                    REALTALK_TIME_HINT,
                    where,
                    f"{field_name}.date_time",
                )
                images = _string_list(message, "img_url", where, field_name) or _string_list(
                    message, "img_file", where, field_name
                )
            else:
                timestamp = session_time
                images = _string_list(message, "img_url", where, field_name)
            caption = message.get("blip_caption", "")
            if not isinstance(caption, str):
                raise ChatFormatError(
                    f"{where}: {field_name}.blip_caption is {type(caption).__name__}; expected a string"
                )

            rows["message_id"].append(f"{chat_file}/{local_id}")
            rows["chat_file"].append(chat_file)
            rows["local_id"].append(local_id)
            rows["position"].append(position)
            rows["session"].append(number)
            rows["speaker"].append(_text(message, "speaker", where, field_name))
            rows["text"].append(text)
            rows["timestamp"].append(timestamp)
            rows["image_urls"].append(images)
            rows["image_caption"].append(caption)

    if not rows["position"]:
        raise ChatFormatError(f"{where}: every session is empty; no messages")

    speakers = [n for n in names if n]
    extra = [s for s in dict.fromkeys(rows["speaker"]) if s not in speakers]
    if extra and speakers:
        notes.append(f"speakers {extra} are not listed in {names_field}")
    speakers += extra

    qa = data.get("qa", [])
    if not isinstance(qa, list) or not all(isinstance(entry, dict) for entry in qa):
        raise ChatFormatError(f"{where}: qa must be a list of objects")

    return Chat(
        chat_file=chat_file,
        path=path,
        format=fmt,
        speakers=speakers,
        messages=with_research_details(pl.DataFrame(rows, schema=schema.MESSAGES)),
        qa=qa,
        notes=notes,
    )


def with_research_details(messages: pl.DataFrame) -> pl.DataFrame:
    """A RealTalk/LoCoMo messages frame as the full record: no zone, no replies, images as photos."""
    attachments = [
        [{"kind": "photo", "name": url, "caption": caption or None} for url in urls]
        for urls, caption in zip(messages["image_urls"].to_list(), messages["image_caption"].to_list())
    ]
    n = messages.height
    details = pl.DataFrame(
        {
            "utc_time": [None] * n,
            "tz": [""] * n,
            "tz_source": [""] * n,
            "reply_to": [None] * n,
            "attachments": attachments,
            "edited": [False] * n,
            "system": [False] * n,
            "bot": [False] * n,
            "reactions": [[] for _ in range(n)],
        },
        schema=schema.MESSAGE_DETAILS,
    )
    return pl.concat([messages, details], how="horizontal")


def read_json_file(path: Path) -> Any:
    """Parsed JSON of ``path``; an empty, non-UTF-8 or malformed file -> ChatFormatError naming it."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ChatFormatError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if not raw.strip():
        raise ChatFormatError(f"{path.name}: empty file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ChatFormatError(
            f"{path.name}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ChatFormatError(f"{path.name}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from exc
    except RecursionError:
        raise ChatFormatError(f"{path.name}: JSON nested too deeply to read (no chat file nests this deep)") from None


def _text(message: dict, key: str, where: str, field_name: str) -> str:
    if key not in message:
        raise ChatFormatError(f"{where}: {field_name}.{key} missing")
    value = message[key]
    if not isinstance(value, str):
        raise ChatFormatError(f"{where}: {field_name}.{key} is {type(value).__name__}; expected a string")
    return value


def _string_list(message: dict, key: str, where: str, field_name: str) -> list[str]:
    value = message.get(key) or []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ChatFormatError(f"{where}: {field_name}.{key} must be a list of strings, got {value!r}")
    return value


def _parse_time(value: Any, formats: tuple[str, ...], hint: str, where: str, field_name: str) -> datetime:
    if not isinstance(value, str):
        raise ChatFormatError(f"{where}: {field_name}: missing or not a string ({value!r}); expected {hint}")
    for fmt in formats:
        try:
            return datetime.strptime(value.strip(), fmt)
        except ValueError:
            continue
    raise ChatFormatError(f"{where}: {field_name}: cannot parse {value!r} (expected {hint})")
