"""Write a list of messages out as each chat app would export it (test data for the readers).

A message is ``(author, utc datetime, text, reply_to)`` where ``reply_to`` is the index of an
earlier message in the list or None. What each format cannot carry is lost as it would be in a
real export: WhatsApp has no replies (and Android no seconds), Slack threads are one level (a
reply to a reply points at the thread's root), Messenger has no replies.

Each writer returns the path to hand to ``read_export``.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

Message = tuple[str, datetime, str, "int | None"]


def _local(moment: datetime, tz: str) -> datetime:
    return moment.astimezone(ZoneInfo(tz))


def whatsapp_android(
    messages: Sequence[Message], folder: Path, *, tz: str, title: str = "Chat", hour12: bool = True
) -> Path:
    """``WhatsApp Chat with <title>.txt``: ``M/D/YY, h:mm AM - Author: text`` (or 24h ``H:MM``)."""
    lines = []
    for author, moment, text, _reply in messages:
        local = _local(moment, tz)
        clock = local.strftime("%I:%M %p").lstrip("0") if hour12 else local.strftime("%H:%M")
        lines.append(f"{local.month}/{local.day}/{local:%y}, {clock} - {author}: {text}")
    path = folder / f"WhatsApp Chat with {title}.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def whatsapp_ios(
    messages: Sequence[Message], folder: Path, *, tz: str, title: str = "Chat", as_zip: bool = False
) -> Path:
    """``_chat.txt``: ``[DD/MM/YYYY, HH:MM:SS] Author: text``, in ``WhatsApp Chat - <title>.zip`` if asked."""
    lines = []
    for author, moment, text, _reply in messages:
        local = _local(moment, tz)
        lines.append(f"[{local:%d/%m/%Y, %H:%M:%S}] {author}: {text}")
    content = "\n".join(lines) + "\n"
    if as_zip:
        path = folder / f"WhatsApp Chat - {title}.zip"
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("_chat.txt", content)
        return path
    chat_folder = folder / f"WhatsApp Chat - {title}"
    chat_folder.mkdir(parents=True, exist_ok=True)
    path = chat_folder / "_chat.txt"
    path.write_text(content, encoding="utf-8")
    return path


def telegram(messages: Sequence[Message], folder: Path, *, tz: str, title: str = "Chat", chat_id: int = 4242) -> Path:
    """Telegram Desktop single-chat ``result.json`` (ids 1..n, local ``date`` and ``date_unixtime``)."""
    authors = _authors(messages)
    records = []
    for index, (author, moment, text, reply) in enumerate(messages):
        record = {
            "id": index + 1,
            "type": "message",
            "date": _local(moment, tz).replace(tzinfo=None).isoformat(),
            "date_unixtime": str(int(moment.timestamp())),
            "from": author,
            "from_id": f"user{authors[author]}",
            "text": text,
            "text_entities": [{"type": "plain", "text": text}],
        }
        if reply is not None:
            record["reply_to_message_id"] = reply + 1
        records.append(record)
    path = folder / "result.json"
    path.write_text(
        json.dumps(
            {"name": title, "type": "private_group", "id": chat_id, "messages": records}, ensure_ascii=False, indent=1
        ),
        encoding="utf-8",
    )
    return path


def slack_ts(messages: Sequence[Message]) -> list[str]:
    """Each message's ``ts``: its epoch seconds, microseconds bumped only to keep them unique."""
    seen: set[str] = set()
    stamps = []
    for _author, moment, _text, _reply in messages:
        seconds, micros = int(moment.timestamp()), moment.microsecond
        while (ts := f"{seconds}.{micros:06d}") in seen:
            micros += 1
        seen.add(ts)
        stamps.append(ts)
    return stamps


def slack(messages: Sequence[Message], folder: Path, *, channel: str = "general", channel_id: str = "C0000001") -> Path:
    """A Slack export folder: users.json, channels.json and ``<channel>/YYYY-MM-DD.json`` (UTC days)."""
    authors = _authors(messages)
    user_ids = {name: f"U{number:07d}" for name, number in authors.items()}
    stamps = slack_ts(messages)
    root_of: list[str] = []
    days: dict[str, list[dict]] = {}
    for index, (author, moment, text, reply) in enumerate(messages):
        record = {"type": "message", "user": user_ids[author], "text": _slack_escape(text), "ts": stamps[index]}
        root = stamps[index] if reply is None else root_of[reply]
        root_of.append(root)
        if reply is not None:
            record["thread_ts"] = root
        days.setdefault(moment.astimezone(UTC).strftime("%Y-%m-%d"), []).append(record)
    root_dir = folder / "slack_export"
    (root_dir / channel).mkdir(parents=True, exist_ok=True)
    users = [
        {
            "id": uid,
            "name": name.lower().replace(" ", "."),
            "real_name": name,
            "profile": {"real_name": name, "display_name": name},
            "tz": "UTC",
        }
        for name, uid in user_ids.items()
    ]
    (root_dir / "users.json").write_text(json.dumps(users, ensure_ascii=False), encoding="utf-8")
    channels = [{"id": channel_id, "name": channel, "members": list(user_ids.values())}]
    (root_dir / "channels.json").write_text(json.dumps(channels), encoding="utf-8")
    for day, records in days.items():
        (root_dir / channel / f"{day}.json").write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    return root_dir


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def discord(
    messages: Sequence[Message],
    folder: Path,
    *,
    tz: str,
    channel: str = "general",
    channel_id: str = "900000000000000001",
) -> Path:
    """DiscordChatExporter JSON: snowflake-like ids, ISO times with the zone's offset, replies by reference."""
    authors = _authors(messages)
    ids = [str(1_000_000_000_000_000_000 + index) for index in range(len(messages))]
    records = []
    for index, (author, moment, text, reply) in enumerate(messages):
        record = {
            "id": ids[index],
            "type": "Reply" if reply is not None else "Default",
            "timestamp": _local(moment, tz).isoformat(),
            "timestampEdited": None,
            "isPinned": False,
            "content": text,
            "author": {"id": str(authors[author]), "name": author, "nickname": author, "isBot": False},
            "attachments": [],
            "embeds": [],
            "stickers": [],
            "reactions": [],
            "mentions": [],
        }
        if reply is not None:
            record["reference"] = {"messageId": ids[reply], "channelId": channel_id, "guildId": "1"}
        records.append(record)
    export = {
        "guild": {"id": "1", "name": "Test Guild"},
        "channel": {"id": channel_id, "type": "GuildTextChat", "category": "Text", "name": channel},
        "messages": records,
        "messageCount": len(records),
    }
    path = folder / f"Test Guild - {channel} [{channel_id}].json"
    path.write_text(json.dumps(export, ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def messenger(
    messages: Sequence[Message], folder: Path, *, thread: str = "chat_123", title: str = "Chat", per_file: int = 10_000
) -> Path:
    """An ``inbox/<thread>/message_N.json`` tree: newest first, strings escaped as Facebook does."""
    newest_first = [
        {
            "sender_name": _facebook_escape(author),
            "timestamp_ms": int(moment.timestamp() * 1000),
            "content": _facebook_escape(text),
            "is_geoblocked_for_viewer": False,
        }
        for author, moment, text, _reply in reversed(messages)
    ]
    thread_dir = folder / "messages" / "inbox" / thread
    thread_dir.mkdir(parents=True, exist_ok=True)
    participants = [{"name": _facebook_escape(name)} for name in _authors(messages)]
    for number, start in enumerate(range(0, max(len(newest_first), 1), per_file), start=1):
        data = {
            "participants": participants,
            "messages": newest_first[start : start + per_file],
            "title": _facebook_escape(title),
            "thread_path": f"inbox/{thread}",
        }
        (thread_dir / f"message_{number}.json").write_text(json.dumps(data, ensure_ascii=True), encoding="ascii")
    return folder / "messages" / "inbox"


def _facebook_escape(text: str) -> str:
    """UTF-8 bytes as latin-1 characters: json.dumps then writes them as ``\\u00XX``."""
    return text.encode("utf-8").decode("latin-1")


def signal(messages: Sequence[Message], folder: Path, *, tz: str, title: str = "Chat") -> Path:
    """signal-export ``data.json``: one object per line, local ``date``, ``quote`` = the quoted text."""
    chat_dir = folder / title
    chat_dir.mkdir(parents=True, exist_ok=True)
    lines = []
    for author, moment, text, reply in messages:
        record = {
            "date": _local(moment, tz).strftime("%Y-%m-%d %H:%M:%S"),
            "sender": author,
            "body": text,
            "quote": messages[reply][2] if reply is not None else "",
            "attachments": [],
            "reactions": [],
        }
        lines.append(json.dumps(record, ensure_ascii=False))
    path = chat_dir / "data.json"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _authors(messages: Sequence[Message]) -> dict[str, int]:
    return {name: number for number, name in enumerate(dict.fromkeys(m[0] for m in messages), start=1)}
