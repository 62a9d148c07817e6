"""Telegram Desktop ``result.json``: one chat ``{name, type, id, messages[]}`` or a full export
``{..., chats: {list: [...]}, left_chats: {list: [...]}}``.

Facts: ``id`` is the message id (per chat); ``type`` is ``message`` or ``service`` (group
changes, with ``actor`` and ``action``); ``date`` is local ISO without offset and
``date_unixtime`` the epoch as a string (missing in old exports, which then need a zone): their
difference is the offset the exporting machine showed, kept per message; ``from``/``from_id``;
``reply_to_message_id``; ``edited``/``edited_unixtime``; ``forwarded_from``/``saved_from`` (the
origin leads the forwarder's text); ``photo``/``file`` (+ ``media_type``, ``file_name``).
``text`` is a string or a list of strings and ``{type, text, href}`` entities, joined without
adding spaces (``text_entities`` is the same as a list). A ``pin_message`` service message's
``message_id`` is the pinned message (same chat): its line quotes that message and replies to it
when the export holds it (a pin may point before the export's range).

Files are streamed with ijson (in linear time: exports/jsonstream.py): a single chat's messages
one at a time, a full export one chat at a time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import ijson

from narrative_mirror.exports import jsonstream
from narrative_mirror.exports.archive import json_error_path
from narrative_mirror.exports.limits import open_file
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
    read_each,
    resolve_pins,
)
from narrative_mirror.exports.timezones import ZoneChoice, epoch_to_utc, offset_name
from narrative_mirror.reactions import Reaction

FORMAT = "telegram"
CHAT_LISTS = ("chats", "left_chats")


def top_level_keys(handle: IO[bytes], stop: tuple[str, ...] = ("messages", "chats")) -> list[str]:
    """The file's top-level keys up to the first of ``stop`` (streamed; values are skipped)."""
    return _top_level(handle, stop)[0]


def _top_level(handle: IO[bytes], stop: tuple[str, ...]) -> tuple[list[str], dict[str, Any], str | None]:
    """(top-level keys up to the first of ``stop``, the scalar values before it, the event that
    opens the stop key's value)."""
    keys: list[str] = []
    scalars: dict[str, Any] = {}
    events = jsonstream.parse(handle)
    for prefix, event, value in events:
        if prefix == "" and event == "map_key":
            keys.append(value)
            if value in stop:
                return keys, scalars, next(events, ("", None, None))[1]
        elif prefix == "" and event in ("start_array", "string", "number"):
            break
        elif prefix in keys and event in ("string", "number", "boolean", "null"):
            scalars[prefix] = value
    return keys, scalars, None


def read(path: Path, zone: ZoneChoice, on_progress: ProgressCallback | None) -> Iterator[Conversation]:
    try:
        with open_file(path) as handle:
            keys, head, opening = _top_level(handle, ("messages", "chats"))
        if "chats" in keys:
            yield from _full_export(path, zone, on_progress)
            return
        if "messages" not in keys:
            raise ExportFormatError(path, "$.messages", "missing")
        if opening != "start_array":
            raise ExportFormatError(path, "$.messages", "expected an array")
        # The messages are streamed one at a time: a chat is never held as raw JSON whole.
        with open_file(path) as handle:
            conversation = _chat(
                head,
                jsonstream.items(handle, "messages.item"),
                path=path,
                where="",
                zone=zone,
                fallback_title=path.stem,
            )
    except ijson.JSONError as exc:
        raise _invalid_json(path, exc) from exc
    yield conversation
    if on_progress is not None:
        on_progress(1, 1, conversation.title)


def _full_export(path: Path, zone: ZoneChoice, on_progress: ProgressCallback | None) -> Iterator[Conversation]:
    done = 0
    for list_name in CHAT_LISTS:
        index = -1
        with open_file(path) as handle:
            chats = jsonstream.items(handle, f"{list_name}.list.item")
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
    with open_file(path) as handle:
        where = json_error_path(handle)
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return ExportFormatError(path, where, f"invalid JSON ({reason})")


def read_chat(chat: Any, *, path: Path, where: str, zone: ZoneChoice, fallback_title: str) -> Conversation:
    """One chat object (``{name, type, id, messages}``) as a conversation."""
    if not isinstance(chat, dict):
        raise ExportFormatError(path, where or None, f"expected a chat object, found {type(chat).__name__}")
    items = json_field(chat, "messages", where or "$", path, list)
    return _chat(chat, items, path=path, where=where, zone=zone, fallback_title=fallback_title)


def _chat(
    head: dict, items: Iterable[Any], *, path: Path, where: str, zone: ZoneChoice, fallback_title: str
) -> Conversation:
    prefix = f"{where}." if where else ""
    title = str(head.get("name") or fallback_title)
    chat_id = head.get("id")
    key = conversation_key(FORMAT, title)
    ids = StableIds()
    warnings: list[str] = []
    pins: dict[str, str] = {}  # pin line's local id -> the pinned message's id
    messages = read_each(
        ((f"{prefix}messages[{index}]", item) for index, item in enumerate(items)),
        lambda item, where: _message(item, where, path, zone, ids, pins),
        "chat",
        warnings,
        name_of=_id_name,
    )
    if pins:  # resolved once the whole chat is read: a pinned message may come after its pin line
        messages = resolve_pins(messages, pins)
    file_zones = Counter(m.tz for m in messages if m.tz_source == TZ_FROM_FILE)
    tz, tz_source = (file_zones.most_common(1)[0][0], TZ_FROM_FILE) if file_zones else (zone.name, zone.source)
    conversation = conversation_from_messages(
        key=key,
        title=title,
        source_format=FORMAT,
        source=str(path),
        messages=messages,
        tz=tz,
        tz_source=tz_source,
        native_id=str(chat_id) if chat_id is not None else "",
    )
    conversation.warnings.extend(warnings)
    return conversation


def _id_name(item: Any, where: str) -> str:
    native = item.get("id") if isinstance(item, dict) else None
    return f"id {native}" if native is not None else where


def text_of(value: Any, path: Path, where: str) -> str:
    """A ``text`` field as plain text: a string, or strings and ``{type, text}`` entities joined as
    they are; a ``text_link`` keeps its target after its words (``the map (https://...)``)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise ExportFormatError(path, where, f"expected a string or a list, found {value!r}")
    parts = []
    for index, part in enumerate(value):
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            href = part.get("href")
            linked = isinstance(href, str) and href and href != part["text"]
            parts.append(f"{part['text']} ({href})" if linked else part["text"])
        else:
            raise ExportFormatError(
                path, f"{where}[{index}]", f"expected a string or an entity with text, found {part!r}"
            )
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


def _message(
    item: Any, where: str, path: Path, zone: ZoneChoice, ids: StableIds, pins: dict[str, str]
) -> ExportedMessage:
    if not isinstance(item, dict):
        raise ExportFormatError(path, where, f"expected a message object, found {type(item).__name__}")
    kind = item.get("type", "message")
    if kind not in ("message", "service"):
        raise ExportFormatError(path, f"{where}.type", f"unknown message type {kind!r}")
    utc, tz, tz_source = _time(item, where, path, zone)
    if item.get("text") or not item.get("text_entities"):
        text = text_of(item.get("text", ""), path, f"{where}.text")
    else:
        text = text_of(item["text_entities"], path, f"{where}.text_entities")
    system = kind == "service"
    if system:
        author = str(item.get("actor") or "")
        text = service_text(item, author) + (f": {text}" if text else "")
    else:
        author = str(item.get("from") or item.get("from_id") or "Deleted Account")
        # A forward stays the forwarder's message (they said it here); its origin leads the text.
        origin = item.get("forwarded_from") or item.get("saved_from")
        if isinstance(origin, str) and origin.strip():
            text = f"[forwarded from {origin.strip()}]" + (f" {text}" if text else "")
    native = item.get("id")
    local_id = str(native) if native is not None else ids.next_id(author, utc, text)
    reply = item.get("reply_to_message_id")
    if system and item.get("action") == "pin_message":
        pinned = item.get("message_id", reply)
        if isinstance(pinned, (str, int)) and not isinstance(pinned, bool) and str(pinned):
            pins[local_id] = str(pinned)
        reply = None  # set by resolve_pins when the pinned message is in the export
    attachments = tuple(a._replace(caption=text or a.caption) for a in _attachments(item)) if not system else ()
    return ExportedMessage(
        local_id=local_id,
        author=author,
        timestamp=utc,
        tz=tz,
        tz_source=tz_source,
        text=text,
        reply_to=str(reply) if reply is not None else None,
        attachments=attachments,
        edited="edited" in item or "edited_unixtime" in item,
        system=system,
        reactions=_reactions(item.get("reactions")),
    )


def _reactions(reactions: Any) -> tuple[Reaction, ...]:
    """``reactions: [{type: emoji|custom_emoji|paid, count, emoji, recent: [{from}]}]``: ``recent``
    names only the latest few who reacted; a custom emoji (a sticker id) is "custom emoji"."""
    found = []
    for reaction in reactions if isinstance(reactions, list) else ():
        if not isinstance(reaction, dict):
            continue
        drawn = reaction.get("emoji") if reaction.get("type", "emoji") == "emoji" else reaction.get("type")
        if not isinstance(drawn, str) or not drawn:
            continue
        recent = reaction.get("recent") if isinstance(reaction.get("recent"), list) else []
        people = [
            str(r.get("from") or r.get("from_id"))
            for r in recent
            if isinstance(r, dict) and (r.get("from") or r.get("from_id"))
        ]
        found.append(Reaction.listed(drawn.replace("_", " "), people, reaction.get("count")))
    return tuple(found)


def _names(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value if v)
    return str(value) if value else ""


def service_text(item: dict, actor: str) -> str:
    """A service message as the line Telegram shows (``Ann added Dee, Eve``)."""
    action = str(item.get("action") or "service")
    who = actor or "Someone"
    members = _names(item.get("members"))
    title = str(item.get("title") or "")
    if action in ("create_group", "create_channel", "migrate_from_group"):
        line = f"{who} created the group" + (f" «{title}»" if title else "")
        return line + (f" with {members}" if members else "")
    if action == "invite_members":
        return f"{who} added {members}" if members and members != actor else f"{who} joined the group"
    if action == "remove_members":
        return f"{who} left the group" if not members or members == actor else f"{who} removed {members}"
    if action == "join_group_by_link":
        inviter = str(item.get("inviter") or "")
        return f"{who} joined the group via invite link" + (f" from {inviter}" if inviter else "")
    if action == "join_group_by_request":
        return f"{who} joined the group (request approved)"
    if action == "pin_message":
        return f"{who} pinned a message"  # which one: records.resolve_pins, once the chat is read
    if action == "edit_group_title":
        return f"{who} changed the group name to «{title}»"
    if action == "edit_group_photo":
        return f"{who} changed the group photo"
    if action == "delete_group_photo":
        return f"{who} removed the group photo"
    if action in ("phone_call", "group_call"):
        what = "video call" if item.get("is_video") else "call"
        reason = str(item.get("discard_reason") or "")
        if reason == "missed":
            return f"Missed {what} from {who}"
        duration = item.get("duration_seconds") or item.get("duration")
        return (
            f"{who} started a {what}"
            + (f" ({duration} s)" if duration else "")
            + (f" ({reason})" if reason and reason != "hangup" else "")
        )
    detail = members or title
    return f"{who}: {action.replace('_', ' ')}" + (f" {detail}" if detail else "")


_MEDIA_KINDS = {
    "sticker": "sticker",
    "animation": "gif",
    "video_file": "video",
    "video_message": "video",
    "voice_message": "audio",
    "audio_file": "audio",
}


def _attachments(item: dict) -> tuple[Attachment, ...]:
    found = []
    if item.get("photo"):
        found.append(Attachment("photo", _exported_file(item["photo"]).rsplit("/", 1)[-1], None))
    if item.get("file") or item.get("media_type"):
        name = str(item.get("file_name") or _exported_file(item.get("file"))).rsplit("/", 1)[-1]
        media_type = str(item.get("media_type") or "")
        kind = _MEDIA_KINDS.get(media_type) or kind_from_name(name, "document" if not media_type else "file")
        found.append(Attachment(kind, name, item.get("sticker_emoji") if kind == "sticker" else None))
    for field_name, kind, parts in (
        ("contact_information", "contact", ("first_name", "last_name", "phone_number")),
        ("location_information", "location", ("latitude", "longitude")),
    ):
        value = item.get(field_name)
        if value:
            words = [str(value[p]) for p in parts if isinstance(value, dict) and value.get(p) not in (None, "")]
            found.append(Attachment(kind, "", " ".join(words) or None))
    if isinstance(poll := item.get("poll"), dict):
        found.append(Attachment("poll", "", _poll_text(poll) or None))
    return tuple(found)


def _poll_text(poll: dict) -> str:
    """A poll as its members saw it: "Bank holiday: where? Llanberis 0 votes, Peak 5 votes"."""
    answers = [a for a in poll.get("answers") or [] if isinstance(a, dict) and a.get("text")]
    counted = ", ".join(f"{a['text']} {a.get('voters', 0)} vote{'' if a.get('voters') == 1 else 's'}" for a in answers)
    return " ".join(p for p in (str(poll.get("question") or ""), counted) if p)


def _exported_file(value: Any) -> str:
    """The file's path in the export; "" when the export left it out ("(File not included...)")."""
    text = str(value or "")
    return "" if text.startswith("(") else text
