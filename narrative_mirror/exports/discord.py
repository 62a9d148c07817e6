"""Discord: DiscordChatExporter JSON, one file per channel or thread:
``{guild, channel, messages[], messageCount}``.

Facts: ``id`` is a snowflake string (the message id); ``timestamp`` is ISO with an offset;
``author{id, name, nickname, isBot}`` (the nickname is what the server shows); ``content``;
``reference.messageId`` names the message a reply answers (``type: Reply``);
``timestampEdited`` is set on edited messages; ``attachments[{fileName}]`` and ``stickers``. A
message with no ``content`` (a bot's event card) is the text of its ``embeds`` (title,
description, fields, footer; markdown bold dropped); a message with content keeps that as its
text, and its embeds are link previews: ``link`` attachments whose caption (searched) is the
preview's title and description.
Types other than ordinary messages, replies and command results (member joins, pins, calls,
thread creation, renames) are system messages. For a thread, ``channel.category`` is the parent.
A ``ChannelPinnedMessage``'s ``reference.messageId`` is the pinned message: its line quotes that
message and replies to it when the file holds it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from narrative_mirror.exports.archive import iter_with_index, load_json_file
from narrative_mirror.exports.records import (
    TZ_FROM_FILE,
    Attachment,
    Conversation,
    ExportedMessage,
    ExportFormatError,
    conversation_from_messages,
    conversation_key,
    json_field,
    kind_from_name,
    optional_field,
    read_each,
    resolve_pins,
)
from narrative_mirror.exports.timezones import file_zone_of
from narrative_mirror.reactions import Reaction

FORMAT = "discord"
MESSAGE_TYPES = frozenset(
    {"Default", "Reply", "ChatInputCommand", "ContextMenuCommand", "ApplicationCommand", "ThreadStarterMessage"}
)
# What a system message of each type says when its ``content`` is empty (older exporters write none).
SYSTEM_WORDS = {
    "GuildMemberJoin": "joined the server",
    "RecipientAdd": "added a recipient",
    "RecipientRemove": "left the group",
    "Call": "started a call",
    "ChannelNameChange": "changed the channel name",
    "ChannelIconChange": "changed the channel icon",
    "ChannelPinnedMessage": "pinned a message",
    "ThreadCreated": "started a thread",
}


def read(path: Path) -> Iterator[Conversation]:
    export = load_json_file(path)
    if not isinstance(export, dict):
        raise ExportFormatError(path, "$", "expected an object with guild, channel and messages")
    channel = json_field(export, "channel", "$", path, dict)
    guild = export.get("guild") if isinstance(export.get("guild"), dict) else {}
    channel_id = str(channel.get("id") or "")
    warnings: list[str] = []
    pins: dict[str, str] = {}  # pin line's id -> the pinned message's id
    items = iter_with_index(json_field(export, "messages", "$", path, list), str(path), "messages")
    messages = read_each(
        ((f"messages[{index}]", item) for index, item in items),
        lambda item, where: _message(item, where, path, channel_id, pins),
        "channel",
        warnings,
        name_of=_native_id,
        none_read_raises=True,
    )
    if pins:  # resolved once the whole channel is read, wherever the pinned message stands in it
        messages = resolve_pins(messages, pins)
    title = " / ".join(str(p) for p in (guild.get("name"), channel.get("category"), channel.get("name")) if p)
    title = title or path.stem
    tz = messages[0].tz if messages else "UTC"
    conversation = conversation_from_messages(
        key=conversation_key(FORMAT, str(channel.get("name") or title)),
        title=title,
        source_format=FORMAT,
        source=str(path),
        messages=messages,
        tz=tz,
        tz_source=TZ_FROM_FILE,
        native_id=channel_id,
    )
    conversation.warnings.extend(warnings)
    yield conversation


def _native_id(item: Any, where: str) -> str:
    native = item.get("id") if isinstance(item, dict) else None
    return f"id {native}" if isinstance(native, (str, int)) else where


def _time(value: str, path: Path, where: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ExportFormatError(path, where, f"bad timestamp {value!r}") from exc
    if moment.tzinfo is None:
        raise ExportFormatError(path, where, f"timestamp {value!r} has no offset")
    return moment


def _message(item: Any, where: str, path: Path, channel_id: str, pins: dict[str, str]) -> ExportedMessage:
    if not isinstance(item, dict):
        raise ExportFormatError(path, where, f"expected a message object, found {type(item).__name__}")
    native = json_field(item, "id", where, path, (str, int))
    moment = _time(json_field(item, "timestamp", where, path, str), path, f"{where}.timestamp")
    author = json_field(item, "author", where, path, dict)
    name = author.get("nickname") or author.get("name")
    if not isinstance(name, str):
        raise ExportFormatError(path, f"{where}.author.name", "missing")
    content = item.get("content") or ""
    if not isinstance(content, str):
        raise ExportFormatError(path, f"{where}.content", f"expected str, found {content!r}")
    previews = _link_previews(item) if content.strip() else ()
    if not content.strip():
        content = _embed_text(item)
    kind = optional_field(item, "type", where, path, str, "Default")
    system = kind not in MESSAGE_TYPES
    if system:
        content = _system_line(name, kind, content)
    reference = item.get("reference") if isinstance(item.get("reference"), dict) else {}
    reply_to = reference.get("messageId")
    same_channel = str(reference.get("channelId") or channel_id) == channel_id
    if kind == "ChannelPinnedMessage" and same_channel and isinstance(reply_to, (str, int)) and str(reply_to):
        pins[str(native)] = str(reply_to)
    if system or not same_channel or reply_to is None:
        reply_to = None  # a pin's is set by resolve_pins when the pinned message is in the file
    return ExportedMessage(
        local_id=str(native),
        author=name,
        timestamp=moment.astimezone(UTC),
        tz=file_zone_of(moment),
        tz_source=TZ_FROM_FILE,
        text=content,
        reply_to=str(reply_to) if reply_to is not None else None,
        attachments=_attachments(item, where, path) + previews,
        edited=bool(item.get("timestampEdited")),
        system=system,
        bot=bool(author.get("isBot")),
        reactions=_reactions(item.get("reactions")),
    )


def _reactions(reactions: Any) -> tuple[Reaction, ...]:
    """``reactions: [{emoji: {id, name}, count, users: [...]}]``: a custom emoji (one with an id)
    is ``:name:``; ``users`` (newer exporters) name who reacted by their server nickname."""
    found = []
    for reaction in reactions if isinstance(reactions, list) else ():
        drawn = reaction.get("emoji") if isinstance(reaction, dict) else None
        if not isinstance(drawn, dict) or not isinstance(drawn.get("name"), str) or not drawn["name"]:
            continue
        people = tuple(
            str(user.get("nickname") or user.get("name"))
            for user in (reaction.get("users") if isinstance(reaction.get("users"), list) else [])
            if isinstance(user, dict) and (user.get("nickname") or user.get("name"))
        )
        emoji = f":{drawn['name']}:" if drawn.get("id") else drawn["name"]
        found.append(Reaction.listed(emoji, people, reaction.get("count")))
    return tuple(found)


def _embed_text(item: dict) -> str:
    parts = []
    for embed in item.get("embeds") or []:
        if not isinstance(embed, dict):
            continue
        fields = [f for f in embed.get("fields") or [] if isinstance(f, dict)]
        footer = embed.get("footer") if isinstance(embed.get("footer"), dict) else {}
        for value in (
            embed.get("title"),
            embed.get("description"),
            *(f"{f.get('name') or ''}: {f.get('value') or ''}" for f in fields),
            footer.get("text"),
        ):
            if isinstance(value, str) and value.strip(": "):
                parts.append(value.replace("**", "").strip())
    return "\n".join(parts)


def _link_previews(item: dict) -> tuple[Attachment, ...]:
    """The embeds of a message with content: what its links show ("Powerleague Shoreditch:
    5-a-side pitches in east London"), so that a question about the page finds the message."""
    found = []
    for embed in item.get("embeds") or []:
        if not isinstance(embed, dict):
            continue
        said = [
            v.replace("**", "").strip() for v in (embed.get("title"), embed.get("description")) if isinstance(v, str)
        ]
        caption = ": ".join(v for v in said if v)
        if caption:
            found.append(Attachment("link", str(embed.get("url") or ""), caption))
    return tuple(found)


def _system_line(author: str, kind: str, content: str) -> str:
    """A system line that names who did it, as the transcript shows it without an author:
    ``Joined the server.`` by quinn is ``quinn joined the server.``"""
    words = content.strip() or SYSTEM_WORDS.get(kind) or re.sub(r"(?<!^)(?=[A-Z])", " ", kind).lower()
    if words.casefold().startswith(author.casefold()):
        return words
    return f"{author} {words[:1].lower()}{words[1:]}"


def _attachments(item: dict, where: str, path: Path) -> tuple[Attachment, ...]:
    found = []
    for record in optional_field(item, "attachments", where, path, list, []):
        if isinstance(record, dict):
            name = str(record.get("fileName") or record.get("url") or "").rsplit("/", 1)[-1]
            found.append(Attachment(kind_from_name(name), name, None))
    for record in optional_field(item, "stickers", where, path, list, []):
        if isinstance(record, dict):
            found.append(Attachment("sticker", str(record.get("name") or ""), None))
    return tuple(found)
