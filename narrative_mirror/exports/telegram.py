"""Telegram Desktop ``result.json``: one chat ``{name, type, id, messages[]}`` or a full export
``{..., chats: {list: [...]}, left_chats: {list: [...]}}``.

Facts: ``id`` is the message id (per chat); ``type`` is ``message`` or ``service`` (group
changes, with ``actor`` and ``action``); ``date`` is local ISO without offset and
``date_unixtime`` the epoch as a string (missing in old exports, which then need a zone);
``from``/``from_id``; ``reply_to_message_id``; ``edited``/``edited_unixtime``;
``forwarded_from``; ``photo``/``file`` (+ ``media_type``, ``file_name``). ``text`` is a string
or a list of strings and ``{type, text}`` entities, joined without adding spaces.

Files are streamed with ijson: a full export is read one chat at a time.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import ijson

from narrative_mirror.exports.archive import json_error_path
from narrative_mirror.exports.records import (
    TZ_FROM_FILE,
    Attachment,
    Conversation,
    ExportedMessage,
    ExportFormatError,
    ProgressCallback,
    StableIds,
    conversation_from_messages,
    conversation_key,
    json_field,
    kind_from_name,
)
from narrative_mirror.exports.timezones import ZoneChoice, epoch_to_utc, offset_name

FORMAT = "telegram"
CHAT_LISTS = ("chats", "left_chats")


def top_level_keys(handle: IO[bytes], stop: tuple[str, ...] = ("messages", "chats")) -> list[str]:
    """The file's top-level keys up to the first of ``stop`` (streamed; values are skipped)."""
    keys: list[str] = []
    for prefix, event, value in ijson.parse(handle):
        if prefix == "" and event == "map_key":
            keys.append(value)
            if value in stop:
                break
        elif prefix == "" and event in ("start_array", "string", "number"):
            break
    return keys


def read(path: Path, zone: ZoneChoice, on_progress: ProgressCallback | None) -> Iterator[Conversation]:
    try:
        with path.open("rb") as handle:
            keys = top_level_keys(handle)
        if "chats" in keys:
            yield from _full_export(path, zone, on_progress)
            return
        with path.open("rb") as handle:
            chat = dict(ijson.kvitems(handle, ""))
    except ijson.JSONError as exc:
        raise _invalid_json(path, exc) from exc
    yield read_chat(chat, path=path, where="", zone=zone, fallback_title=path.stem)
    if on_progress is not None:
        on_progress(1, 1, str(chat.get("name") or path.stem))


def _full_export(path: Path, zone: ZoneChoice, on_progress: ProgressCallback | None) -> Iterator[Conversation]:
    done = 0
    for list_name in CHAT_LISTS:
        index = -1
        with path.open("rb") as handle:
            chats = ijson.items(handle, f"{list_name}.list.item")
            while True:
                where = f"{list_name}.list[{index + 1}]"
                try:
                    chat = next(chats)
                except StopIteration:
                    break
                except ijson.JSONError as exc:
                    raise _invalid_json(path, exc) from exc
                index += 1
                yield read_chat(chat, path=path, where=where, zone=zone, fallback_title=f"{path.stem} {index}")
                done += 1
                if on_progress is not None:
                    on_progress(done, None, str(chat.get("name") or where) if isinstance(chat, dict) else where)


def _invalid_json(path: Path, exc: Exception) -> ExportFormatError:
    with path.open("rb") as handle:
        where = json_error_path(handle)
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return ExportFormatError(path, where, f"invalid JSON ({reason})")


def read_chat(chat: Any, *, path: Path, where: str, zone: ZoneChoice, fallback_title: str) -> Conversation:
    """One chat object (``{name, type, id, messages}``) as a conversation."""
    if not isinstance(chat, dict):
        raise ExportFormatError(path, where or None, f"expected a chat object, found {type(chat).__name__}")
    prefix = f"{where}." if where else ""
    items = json_field(chat, "messages", where or "$", path, list)
    title = str(chat.get("name") or fallback_title)
    chat_id = chat.get("id")
    key = conversation_key(FORMAT, title)
    ids = StableIds()
    messages = [
        _message(item, f"{prefix}messages[{index}]", path, zone, ids) for index, item in enumerate(items)
    ]
    first_file_zone = next((m.tz for m in messages if m.tz_source == TZ_FROM_FILE), None)
    tz, tz_source = (first_file_zone, TZ_FROM_FILE) if first_file_zone else (zone.name, zone.source)
    return conversation_from_messages(
        key=key, title=title, source_format=FORMAT, source=str(path), messages=messages,
        tz=tz, tz_source=tz_source, native_id=str(chat_id) if chat_id is not None else "",
    )


def text_of(value: Any, path: Path, where: str) -> str:
    """A ``text`` field: a string, or strings and ``{type, text}`` entities joined as they are."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise ExportFormatError(path, where, f"expected a string or a list, found {value!r}")
    parts = []
    for index, part in enumerate(value):
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append(part["text"])
        else:
            raise ExportFormatError(path, f"{where}[{index}]", f"expected a string or an entity with text, found {part!r}")
    return "".join(parts)


def _time(item: dict, where: str, path: Path, zone: ZoneChoice) -> tuple[datetime, str, str]:
    local = None
    if "date" in item:
        date = json_field(item, "date", where, path, str)
        try:
            local = datetime.fromisoformat(date)
        except ValueError as exc:
            raise ExportFormatError(path, f"{where}.date", f"bad date {date!r}") from exc
    if "date_unixtime" in item:
        raw = json_field(item, "date_unixtime", where, path, (str, int))
        try:
            utc = epoch_to_utc(int(raw))
        except (ValueError, OverflowError, OSError) as exc:
            raise ExportFormatError(path, f"{where}.date_unixtime", f"bad epoch {raw!r}") from exc
        offset = local - utc.replace(tzinfo=None) if local is not None else None
        return utc, offset_name(offset), TZ_FROM_FILE
    if local is None:
        raise ExportFormatError(path, f"{where}.date", "missing (and no date_unixtime)")
    return zone.to_utc(local, path), zone.name, zone.source


def _message(item: Any, where: str, path: Path, zone: ZoneChoice, ids: StableIds) -> ExportedMessage:
    if not isinstance(item, dict):
        raise ExportFormatError(path, where, f"expected a message object, found {type(item).__name__}")
    kind = item.get("type", "message")
    if kind not in ("message", "service"):
        raise ExportFormatError(path, f"{where}.type", f"unknown message type {kind!r}")
    utc, tz, tz_source = _time(item, where, path, zone)
    text = text_of(item.get("text", ""), path, f"{where}.text")
    system = kind == "service"
    if system:
        author = str(item.get("actor") or "")
        if not text:
            text = _service_text(item)
    else:
        author = str(item.get("from") or item.get("from_id") or "Deleted Account")
    native = item.get("id")
    local_id = str(native) if native is not None else ids.next_id(author, utc, text)
    reply = item.get("reply_to_message_id")
    attachments = tuple(a._replace(caption=text or None) for a in _attachments(item)) if not system else ()
    return ExportedMessage(
        local_id=local_id, author=author, timestamp=utc, tz=tz, tz_source=tz_source, text=text,
        reply_to=str(reply) if reply is not None else None, attachments=attachments,
        edited="edited" in item or "edited_unixtime" in item, system=system,
    )


def _service_text(item: dict) -> str:
    """A service message's action with what it names (``invite_members: Ann, Bo``)."""
    action = str(item.get("action") or "service")
    detail = item.get("members") or item.get("title") or item.get("inviter")
    if isinstance(detail, list):
        detail = ", ".join(str(d) for d in detail if d)
    return f"{action}: {detail}" if detail else action


def _attachments(item: dict) -> tuple[Attachment, ...]:
    found = []
    if item.get("photo"):
        found.append(Attachment("photo", str(item["photo"]).rsplit("/", 1)[-1], None))
    if item.get("file"):
        name = str(item.get("file_name") or item["file"]).rsplit("/", 1)[-1]
        kind = str(item.get("media_type") or kind_from_name(name))
        found.append(Attachment(kind, name, None))
    for field_name, kind in (("contact_information", "contact"), ("location_information", "location"),
                             ("poll", "poll")):
        if item.get(field_name):
            found.append(Attachment(kind, "", None))
    return tuple(found)
