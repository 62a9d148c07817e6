"""One conversation of an export as a chat: the message record every format shares.

Columns are schema.MESSAGE_RECORD, the same as a RealTalk/LoCoMo chat's: ``local_id`` is the
native id or the reader's stable content id; ``timestamp`` the local wall-clock time in the zone
the message records (``tz``: the chat's zone, or the offset the file gave that message; what
relative dates are read against), ``utc_time`` the instant, ``tz_source`` where the zone came from; sessions come from
silence gaps (narrative_mirror/layers/sessions.py; the gap is one of the reading options,
``layers.toml [sessions]``). Exports carry no gold questions.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, timedelta

import polars as pl

from narrative_mirror import schema
from narrative_mirror.chats import MAX_TEXT_CHARS, Chat, ChatFormatError
from narrative_mirror.exports.folder import ChatSource, ImportOptions
from narrative_mirror.exports.limits import checked_messages
from narrative_mirror.exports.reader import read_export
from narrative_mirror.exports.records import TZ_FROM_FILE, Conversation, ExportedMessage, ExportFormatError
from narrative_mirror.exports.timezones import choose_zone, zone_named, zone_of_offsets
from narrative_mirror.layers.sessions import sessions_by_gap


class ExportChatError(ChatFormatError):
    """An export that cannot be read into a chat (names the file, the place and the problem)."""


def load_export_chat(source: ChatSource, options: ImportOptions) -> Chat:
    """The chat of ``source`` (one conversation of an export), read with ``options``."""
    try:
        for conversation in read_export(
            source.path, source.format, options.tz, options.day_first, machine_tz=options.machine_tz
        ):
            if source.is_conversation(conversation):
                return conversation_chat(replace(conversation, key=source.key), options, path=source.path)
    except ExportFormatError as exc:
        raise ExportChatError(" ".join(str(exc).split())) from None
    raise ExportChatError(f"{source.path}: no conversation {source.key!r} in the export any more")


def conversation_chat(conversation: Conversation, options: ImportOptions, path=None) -> Chat:
    zone = choose_zone(options.tz, options.machine_tz)
    messages = list(checked_messages(conversation))
    if not messages:
        left_out = conversation.warnings
        why = f": {len(left_out)} unreadable, e.g. {left_out[0]}" if left_out else ""
        raise ExportChatError(f"{conversation.source}: the conversation {conversation.title!r} has no messages{why}")
    key = conversation.key
    notes: list[str] = list(conversation.warnings)
    ids: list[str] = []
    seen: dict[str, int] = {}
    for message in messages:
        local_id = message.local_id
        if local_id in seen:  # a reader's id twice (an export's own duplicate): keep both, apart
            seen[local_id] += 1
            notes.append(f"message id {local_id!r} repeated: the repeat is {local_id}~{seen[local_id]}")
            local_id = f"{local_id}~{seen[local_id]}"
        else:
            seen[local_id] = 0
        ids.append(local_id)
    texts = []
    for local_id, message in zip(ids, messages):
        text = message.text
        if len(text) > MAX_TEXT_CHARS:
            notes.append(f"{local_id}: text truncated from {len(text)} to {MAX_TEXT_CHARS} characters")
            text = text[:MAX_TEXT_CHARS]
        texts.append(text)
    is_slack = conversation.source_format == "slack"
    wall_clock = [_wall_clock(m) for m in messages]
    sessions = sessions_by_gap(
        [m.timestamp for m in messages],
        timedelta(hours=options.session_gap_hours),
        days=[local.date() for local in wall_clock] if is_slack else None,
        ids=ids,
        thread_roots=[m.reply_to for m in messages] if is_slack else None,
    )
    photos = [[a.name for a in m.attachments if a.kind in ("photo", "gif") and a.name] for m in messages]
    captions = [" ".join(a.caption for a in m.attachments if a.caption) for m in messages]
    frame = pl.DataFrame(
        {
            "message_id": [f"{key}/{i}" for i in ids],
            "chat_file": [key] * len(ids),
            "local_id": ids,
            "position": list(range(len(ids))),
            "session": sessions,
            "speaker": [m.author for m in messages],
            "text": texts,
            "timestamp": wall_clock,
            "image_urls": photos,
            "image_caption": captions,
            "utc_time": [m.timestamp.astimezone(UTC) for m in messages],
            "tz": [m.tz for m in messages],
            "tz_source": [m.tz_source for m in messages],
            "reply_to": [m.reply_to for m in messages],
            "attachments": [
                [{"kind": a.kind, "name": a.name, "caption": a.caption} for a in m.attachments] for m in messages
            ],
            "edited": [m.edited for m in messages],
            "system": [m.system for m in messages],
            "bot": [m.bot for m in messages],
            "reactions": [
                [{"emoji": r.emoji, "people": list(r.people), "count": r.count} for r in m.reactions] for m in messages
            ],
        },
        schema=schema.MESSAGE_RECORD,
    )
    return Chat(
        chat_file=key,
        path=path or conversation.source,
        format=conversation.source_format,
        speakers=list(conversation.participants),
        messages=frame,
        qa=[],
        notes=notes,
        tz=zone_of_offsets(
            [(m.timestamp, m.tz) for m in messages if m.tz_source == TZ_FROM_FILE],
            conversation.tz or (zone.name or "UTC"),
            zone.zone,
        ),
        tz_source=conversation.tz_source,
    )


def _wall_clock(message: ExportedMessage):
    """The message's local time in the zone it records (what its chat showed), without zone."""
    return message.timestamp.astimezone(zone_named(message.tz)).replace(tzinfo=None)
