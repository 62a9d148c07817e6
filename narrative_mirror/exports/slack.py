"""Slack workspace export (a zip or its folder): ``users.json``, ``channels.json`` (+ ``groups``,
``dms``, ``mpims.json`` in full exports) and one folder per channel of ``YYYY-MM-DD.json`` arrays.

Facts: ``ts`` is the UTC epoch as a string, unique per channel: it is the message id;
``thread_ts`` differing from ``ts`` makes a reply to the thread's parent; ``edited`` marks the
final text of an edited message; ``subtype`` marks joins, topic changes and the like (system),
``bot_message`` (bots), ``file_share`` (with ``files``), ``file_comment`` (author and words in
``comment``); ``message_changed`` / ``message_deleted`` events carry no message of their own and
are skipped. Words come from ``text``, ``blocks`` and legacy ``attachments`` (slack_text.py).
Times are shown in the zone most of the channel's members have (``users.json`` ``tz``), else in
--tz, else UTC: Slack itself stores only UTC. A message that cannot be read is one warning line in
``Conversation.warnings``; the rest of its channel is still read.

Streaming: one conversation per channel; its messages are read lazily one day file at a time,
so memory stays bounded by the largest day file however big the export.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from narrative_mirror.exports.archive import ExportTree, base_of, iter_with_index, parent_of
from narrative_mirror.exports.limits import ReadBudget
from narrative_mirror.exports.records import (
    TZ_FROM_ARGUMENT,
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
    read_each,
)
from narrative_mirror.exports.slack_text import message_text, render_markup, shortcode_emoji
from narrative_mirror.exports.timezones import ZoneChoice
from narrative_mirror.reactions import Reaction

FORMAT = "slack"
INDEX_FILES = ("channels.json", "groups.json", "mpims.json", "dms.json")
DAY_FILE = re.compile(r"^\d{4}-\d{2}-\d{2}\.json$")
SYSTEM_SUBTYPES = frozenset(
    {
        "channel_join",
        "channel_leave",
        "channel_topic",
        "channel_purpose",
        "channel_name",
        "channel_archive",
        "channel_unarchive",
        "channel_convert_to_private",
        "group_join",
        "group_leave",
        "group_topic",
        "group_purpose",
        "group_name",
        "group_archive",
        "group_unarchive",
        "pinned_item",
        "unpinned_item",
        "bot_add",
        "bot_remove",
        "reminder_add",
        "tombstone",
        "huddle_thread",
        "sh_room_created",
    }
)
SKIPPED_SUBTYPES = frozenset({"message_changed", "message_deleted", "message_replied"})


class Users:
    """Names and zones from ``users.json``: people by their real name (else display name, else
    handle), bots by their bot name, reachable by user id and by a bot's ``bot_id``."""

    def __init__(self, records: list[dict]):
        self.names: dict[str, str] = {}
        self.zones: dict[str, str] = {}
        self.bots: set[str] = set()
        for record in records:
            if not isinstance(record, dict) or not isinstance(record.get("id"), str):
                continue
            profile = record.get("profile") if isinstance(record.get("profile"), dict) else {}
            name = person_name(record, profile) or record["id"]
            self.names[record["id"]] = name
            if isinstance(record.get("tz"), str) and record["tz"] and not record.get("is_bot"):
                self.zones[record["id"]] = record["tz"]
            if record.get("is_bot") or record["id"] == "USLACKBOT":
                self.bots.add(record["id"])
                if isinstance(profile.get("bot_id"), str):
                    self.names.setdefault(profile["bot_id"], name)
                    self.bots.add(profile["bot_id"])

    def name(self, user_id: str) -> str:
        return self.names.get(user_id, user_id)

    def zone_of(self, members: list[str]) -> str | None:
        """The zone most of ``members`` (else of all people) have; ties go to the first seen."""
        zones = [self.zones[m] for m in members if m in self.zones] or list(self.zones.values())
        return Counter(zones).most_common(1)[0][0] if zones else None


def person_name(record: dict, profile: dict) -> str:
    for value in (profile.get("real_name"), record.get("real_name"), profile.get("display_name"), record.get("name")):
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def find_root(names: list[str]) -> str | None:
    """The folder prefix ("" or "export/") holding ``channels.json`` or ``users.json``."""
    for name in names:
        if base_of(name) in ("channels.json", "users.json") and name.count("/") <= 1:
            folder = parent_of(name)
            return f"{folder}/" if folder else ""
    return None


def read(path: Path, zone: ZoneChoice, on_progress: ProgressCallback | None) -> Iterator[Conversation]:
    tree = ExportTree(path)
    try:
        names = tree.names()
        root = find_root(names)
        if root is None:
            raise ExportFormatError(path, None, "no channels.json or users.json: not a Slack export")
        users = Users(_index(tree, f"{root}users.json", names))
        channels: dict[str, dict] = {}
        for index_file in INDEX_FILES:
            for position, record in iter_with_index(
                _index(tree, root + index_file, names), tree.label(root + index_file), "$"
            ):
                record = record if isinstance(record, dict) else {}
                folder = record.get("name") or record.get("id")
                if not isinstance(folder, str):
                    raise ExportFormatError(tree.label(root + index_file), f"[{position}]", "no name or id")
                channels[folder] = record
        day_files: dict[str, list[str]] = {}
        for name in names:
            folder = parent_of(name)
            if name.startswith(root) and DAY_FILE.match(base_of(name)) and folder and "/" not in folder[len(root) :]:
                day_files.setdefault(folder[len(root) :], []).append(name)
    finally:
        tree.close()
    channel_ids = {r["id"]: folder for folder, r in channels.items() if isinstance(r.get("id"), str)}
    folders = sorted(day_files)
    for done, folder in enumerate(folders, start=1):
        record = channels.get(folder, {})
        label = tree.label(root + folder)
        yield _conversation(
            path, label, folder, record, sorted(day_files[folder]), users, channel_ids, zone, tree.budget
        )
        if on_progress is not None:
            on_progress(done, len(folders), folder)


def _index(tree: ExportTree, name: str, names: list[str]) -> list:
    if name not in names:
        return []
    records = tree.load_json(name)
    if not isinstance(records, list):
        raise ExportFormatError(tree.label(name), "$", f"expected an array, found {type(records).__name__}")
    return records


def _conversation(
    path: Path,
    label: str,
    folder: str,
    record: dict,
    files: list[str],
    users: Users,
    channel_ids: dict[str, str],
    zone: ZoneChoice,
    budget: ReadBudget,
) -> Conversation:
    channel_id = record.get("id") if isinstance(record.get("id"), str) else None
    members = (
        [m for m in record.get("members") or [] if isinstance(m, str)]
        if isinstance(record.get("members"), list)
        else []
    )
    title = folder if record.get("name") or not members else ", ".join(users.name(m) for m in members)
    # Slack stores UTC: the chat is shown in the zone its people recorded (as Telegram's offsets
    # win over --tz); --tz, given for a folder's zoneless exports, only stands in when none did.
    if recorded := users.zone_of(members):
        tz, tz_source = recorded, TZ_FROM_FILE
    elif zone.source == TZ_FROM_ARGUMENT:
        tz, tz_source = zone.name, zone.source
    else:
        tz, tz_source = "UTC", TZ_FROM_FILE
    warnings: list[str] = []

    def read_messages() -> Iterator[ExportedMessage]:
        warnings.clear()
        tree = ExportTree(path, budget)
        try:
            for name in files:
                yield from _day(tree, name, users, channel_ids, tz, tz_source, warnings)
        finally:
            tree.close()

    return Conversation(
        key=conversation_key(FORMAT, title),
        title=title,
        native_id=channel_id or folder,
        participants=tuple(users.name(m) for m in members if m not in users.bots),
        source_format=FORMAT,
        tz=tz,
        tz_source=tz_source,
        source=label,
        _read=read_messages,
        warnings=warnings,
    )


def _ts_key(ts: str) -> tuple[int, int]:
    seconds, _, fraction = ts.partition(".")
    return int(seconds), int((fraction or "0").ljust(6, "0")[:6])


def _day(
    tree: ExportTree, name: str, users: Users, channel_ids: dict[str, str], tz: str, tz_source: str, warnings: list[str]
) -> Iterator[ExportedMessage]:
    """One day file's messages in time order; a message that cannot be read is one warning."""
    label = tree.label(name)
    items = tree.load_json(name)
    messages = read_each(
        ((f"[{index}]", item) for index, item in iter_with_index(items, label, "$")),
        lambda item, where: _message(item, where, label, users, channel_ids, tz, tz_source),
        "channel",
        warnings,
        name_of=_ts_name,
    )
    messages.sort(key=lambda m: _ts_key(m.local_id))
    yield from messages


def _ts_name(item: Any, where: str) -> str:
    ts = item.get("ts") if isinstance(item, dict) else None
    return f"ts {ts}" if isinstance(ts, str) and ts else where


def _message(
    item: Any, where: str, label: str, users: Users, channel_ids: dict[str, str], tz: str, tz_source: str
) -> ExportedMessage | None:
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
    comment = item.get("comment") if isinstance(item.get("comment"), dict) else None
    if subtype == "file_comment" and comment is not None:
        source = comment
        text = render_markup(str(comment.get("comment") or ""), users.names, channel_ids).strip()
    else:
        source = item
        text = message_text(item, users.names, channel_ids)
    if subtype == "tombstone":  # a deleted message that keeps its thread: nobody's words
        author, bot = "", False
    else:
        found, bot = _author(source if "user" in source else item, subtype, users)
        if found is None:
            raise ExportFormatError(label, f"{where}.user", "missing (no user, username, bot_profile or bot_id)")
        author = found
    if subtype == "me_message" and text:
        text = f"{author} {text}"
    files = [*(item.get("files") if isinstance(item.get("files"), list) else []), item.get("file")]
    thread_ts = item.get("thread_ts")
    return ExportedMessage(
        local_id=ts,
        author=author,
        timestamp=utc,
        tz=tz,
        tz_source=tz_source,
        text=text,
        reply_to=thread_ts if isinstance(thread_ts, str) and thread_ts != ts else None,
        attachments=_files(files),
        edited="edited" in item,
        system=subtype in SYSTEM_SUBTYPES,
        bot=bot,
        reactions=_reactions(item.get("reactions"), users),
    )


def _reactions(reactions: Any, users: Users) -> tuple[Reaction, ...]:
    """``reactions: [{name: "+1", users: [ids], count}]`` as emoji, names and counts."""
    found = []
    for reaction in reactions if isinstance(reactions, list) else ():
        if not isinstance(reaction, dict) or not isinstance(reaction.get("name"), str):
            continue
        name, _, tone = reaction["name"].partition("::skin-tone-")
        listed = reaction.get("users") if isinstance(reaction.get("users"), list) else []
        people = tuple(users.name(u) for u in listed if isinstance(u, str))
        found.append(Reaction.listed(shortcode_emoji(name, tone), people, reaction.get("count")))
    return tuple(found)


def _author(item: dict, subtype: str | None, users: Users) -> tuple[str | None, bool]:
    """(name, written by a bot): people by their users.json name, bots by their bot name."""
    user = item.get("user") if isinstance(item.get("user"), str) else None
    bot_id = item.get("bot_id") if isinstance(item.get("bot_id"), str) else None
    bot_profile = item.get("bot_profile") if isinstance(item.get("bot_profile"), dict) else {}
    is_bot = (
        subtype == "bot_message" or bool(bot_profile) or user in users.bots or (user is None and bot_id is not None)
    )
    if is_bot:
        for name in (
            item.get("username"),
            bot_profile.get("name"),
            users.names.get(bot_id or ""),
            users.names.get(user or ""),
            bot_id,
            user,
        ):
            if isinstance(name, str) and name.strip():
                return name.strip(), True
        return None, True
    if user is None:
        return None, False
    profile = item.get("user_profile") if isinstance(item.get("user_profile"), dict) else {}
    return users.names.get(user) or person_name(profile, profile) or user, False


def _files(files: list[Any]) -> tuple[Attachment, ...]:
    found = []
    for record in files:
        if not isinstance(record, dict):
            continue
        name = str(record.get("name") or record.get("title") or "")
        mimetype = str(record.get("mimetype") or "")
        kind = {"image": "photo", "video": "video", "audio": "audio"}.get(mimetype.split("/")[0])
        title = record.get("title")
        caption = str(title) if isinstance(title, str) and title and title != name else None
        found.append(Attachment(kind or kind_from_name(name), name, caption))
    return tuple(found)
