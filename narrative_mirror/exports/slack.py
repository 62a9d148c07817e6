"""Slack workspace export (a zip or its folder): ``users.json``, ``channels.json`` (+ ``groups``,
``dms``, ``mpims.json`` in full exports) and one folder per channel of ``YYYY-MM-DD.json`` arrays.

Facts: ``ts`` is the UTC epoch as a string, unique per channel: it is the message id;
``thread_ts`` differing from ``ts`` makes a reply to the thread's parent; ``edited`` marks the
final text of an edited message; ``subtype`` marks joins, topic changes and the like (system),
``bot_message`` (bots), ``file_share`` (with ``files``); ``message_changed`` /
``message_deleted`` events carry no message of their own and are skipped. Text is Slack markup:
``<@U123>`` becomes ``@`` and the user's name, ``<#C1|general>`` ``#general``, ``<url|label>``
the label, ``<!here>`` ``@here``; then ``&lt;`` ``&gt;`` ``&amp;`` are unescaped. Users' ``tz``
names each author's zone.

Streaming: one conversation per channel; its messages are read lazily one day file at a time,
so memory stays bounded by the largest day file however big the export.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from narrative_mirror.exports.archive import ExportTree, base_of, iter_with_index, parent_of
from narrative_mirror.exports.records import (
    TZ_FROM_FILE,
    Attachment,
    Conversation,
    ExportedMessage,
    ExportFormatError,
    ProgressCallback,
    conversation_key,
    json_field,
    kind_from_name,
    optional_field,
)

FORMAT = "slack"
INDEX_FILES = ("channels.json", "groups.json", "mpims.json", "dms.json")
DAY_FILE = re.compile(r"^\d{4}-\d{2}-\d{2}\.json$")
SYSTEM_SUBTYPES = frozenset({
    "channel_join", "channel_leave", "channel_topic", "channel_purpose", "channel_name",
    "channel_archive", "channel_unarchive", "channel_convert_to_private", "group_join", "group_leave",
    "group_topic", "group_purpose", "group_name", "group_archive", "group_unarchive", "pinned_item",
    "unpinned_item", "bot_add", "bot_remove", "reminder_add", "tombstone", "huddle_thread",
    "sh_room_created",
})
SKIPPED_SUBTYPES = frozenset({"message_changed", "message_deleted", "message_replied"})
MARKUP = re.compile(r"<([^<>]*)>")


class Users:
    """Names and zones from ``users.json``."""

    def __init__(self, records: list[dict]):
        self.names: dict[str, str] = {}
        self.zones: dict[str, str] = {}
        self.bots: set[str] = set()
        for record in records:
            if not isinstance(record, dict) or not isinstance(record.get("id"), str):
                continue
            profile = record.get("profile") if isinstance(record.get("profile"), dict) else {}
            name = (profile.get("display_name") or profile.get("real_name") or record.get("real_name")
                    or record.get("name") or record["id"])
            self.names[record["id"]] = str(name)
            if isinstance(record.get("tz"), str) and record["tz"]:
                self.zones[record["id"]] = record["tz"]
            if record.get("is_bot"):
                self.bots.add(record["id"])

    def name(self, user_id: str) -> str:
        return self.names.get(user_id, user_id)


def find_root(names: list[str]) -> str | None:
    """The folder prefix ("" or "export/") holding ``channels.json`` or ``users.json``."""
    for name in names:
        if base_of(name) in ("channels.json", "users.json") and name.count("/") <= 1:
            folder = parent_of(name)
            return f"{folder}/" if folder else ""
    return None


def read(path: Path, on_progress: ProgressCallback | None) -> Iterator[Conversation]:
    tree = ExportTree(path)
    try:
        names = tree.names()
        root = find_root(names)
        if root is None:
            raise ExportFormatError(path, None, "no channels.json or users.json: not a Slack export")
        users = Users(_index(tree, f"{root}users.json", names))
        channels: dict[str, dict] = {}
        for index_file in INDEX_FILES:
            for position, record in iter_with_index(_index(tree, root + index_file, names),
                                                    tree.label(root + index_file), "$"):
                record = record if isinstance(record, dict) else {}
                folder = record.get("name") or record.get("id")
                if not isinstance(folder, str):
                    raise ExportFormatError(tree.label(root + index_file), f"[{position}]", "no name or id")
                channels[folder] = record
        day_files: dict[str, list[str]] = {}
        for name in names:
            folder = parent_of(name)
            if name.startswith(root) and DAY_FILE.match(base_of(name)) and folder and "/" not in folder[len(root):]:
                day_files.setdefault(folder[len(root):], []).append(name)
    finally:
        tree.close()
    channel_ids = {r["id"]: folder for folder, r in channels.items() if isinstance(r.get("id"), str)}
    folders = sorted(day_files)
    for done, folder in enumerate(folders, start=1):
        record = channels.get(folder, {})
        label = tree.label(root + folder)
        yield _conversation(path, label, folder, record, sorted(day_files[folder]), users, channel_ids)
        if on_progress is not None:
            on_progress(done, len(folders), folder)


def _index(tree: ExportTree, name: str, names: list[str]) -> list:
    if name not in names:
        return []
    records = tree.load_json(name)
    if not isinstance(records, list):
        raise ExportFormatError(tree.label(name), "$", f"expected an array, found {type(records).__name__}")
    return records


def _conversation(path: Path, label: str, folder: str, record: dict, files: list[str], users: Users,
                  channel_ids: dict[str, str]) -> Conversation:
    channel_id = record.get("id") if isinstance(record.get("id"), str) else None
    members = record.get("members") if isinstance(record.get("members"), list) else []
    title = folder if record.get("name") or not members else ", ".join(users.name(m) for m in members)

    def read_messages() -> Iterator[ExportedMessage]:
        tree = ExportTree(path)
        try:
            for name in files:
                yield from _day(tree, name, users, channel_ids)
        finally:
            tree.close()

    return Conversation(
        key=conversation_key(FORMAT, title), title=title, native_id=channel_id or folder,
        participants=tuple(users.name(m) for m in members if isinstance(m, str)),
        source_format=FORMAT, tz="UTC", tz_source=TZ_FROM_FILE, source=label,
        _read=read_messages,
    )


def _ts_key(ts: str) -> tuple[int, int]:
    seconds, _, fraction = ts.partition(".")
    return int(seconds), int((fraction or "0").ljust(6, "0")[:6])


def _day(tree: ExportTree, name: str, users: Users, channel_ids: dict[str, str]) -> Iterator[ExportedMessage]:
    label = tree.label(name)
    items = tree.load_json(name)
    messages = []
    for index, item in iter_with_index(items, label, "$"):
        message = _message(item, f"[{index}]", label, users, channel_ids)
        if message is not None:
            messages.append(message)
    messages.sort(key=lambda m: _ts_key(m.local_id))
    yield from messages


def _message(item: Any, where: str, label: str, users: Users, channel_ids: dict[str, str]) -> ExportedMessage | None:
    if not isinstance(item, dict):
        raise ExportFormatError(label, where, f"expected a message object, found {type(item).__name__}")
    subtype = optional_field(item, "subtype", where, label, str, None)
    if subtype in SKIPPED_SUBTYPES:
        return None
    ts = json_field(item, "ts", where, label, str)
    try:
        seconds, micros = _ts_key(ts)
        utc = datetime.fromtimestamp(seconds, UTC) + timedelta(microseconds=micros)
    except (ValueError, OverflowError, OSError) as exc:
        raise ExportFormatError(label, f"{where}.ts", f"bad timestamp {ts!r}") from exc
    user = item.get("user") if isinstance(item.get("user"), str) else None
    profile = item.get("user_profile") if isinstance(item.get("user_profile"), dict) else {}
    bot_profile = item.get("bot_profile") if isinstance(item.get("bot_profile"), dict) else {}
    if user is not None:
        author = users.names.get(user) or profile.get("display_name") or profile.get("real_name") or user
    else:
        author = item.get("username") or bot_profile.get("name") or item.get("bot_id")
        if not isinstance(author, str):
            raise ExportFormatError(label, f"{where}.user", "missing (no user, username or bot_id)")
    text = item.get("text") or ""
    if not isinstance(text, str):
        raise ExportFormatError(label, f"{where}.text", f"expected str, found {text!r}")
    thread_ts = item.get("thread_ts")
    return ExportedMessage(
        local_id=ts, author=str(author), timestamp=utc, tz=users.zones.get(user or "", "UTC"),
        tz_source=TZ_FROM_FILE, text=render_markup(text, users, channel_ids),
        reply_to=thread_ts if isinstance(thread_ts, str) and thread_ts != ts else None,
        attachments=_files(item.get("files")), edited="edited" in item,
        system=subtype in SYSTEM_SUBTYPES,
        bot=subtype == "bot_message" or user is None or user in users.bots,
    )


def _files(files: Any) -> tuple[Attachment, ...]:
    if not isinstance(files, list):
        return ()
    found = []
    for record in files:
        if not isinstance(record, dict):
            continue
        name = str(record.get("name") or record.get("title") or "")
        mimetype = str(record.get("mimetype") or "")
        kind = {"image": "photo", "video": "video", "audio": "audio"}.get(mimetype.split("/")[0])
        found.append(Attachment(kind or kind_from_name(name), name, None))
    return tuple(found)


def render_markup(text: str, users: Users, channel_ids: dict[str, str]) -> str:
    """Slack mrkdwn as people read it: mentions by name, links by label, entities unescaped."""

    def replace(match: re.Match[str]) -> str:
        target, _, label = match[1].partition("|")
        if target.startswith("@"):
            return "@" + users.names.get(target[1:], label or target[1:])
        if target.startswith("#"):
            return "#" + (label or channel_ids.get(target[1:], target[1:]))
        if target.startswith("!"):
            command = target[1:].split("^", 1)[0]
            if label:
                return label
            return "@" + command
        return label or target

    rendered = MARKUP.sub(replace, text)
    return rendered.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
