"""Messenger / Instagram "Download your information" JSON: ``message_N.json`` files of one
thread folder, or an ``inbox/`` tree (folder or zip) with one folder per thread.

Facts: no message ids and no replies; ``message_1.json`` holds the newest messages and each
file lists newest first; ``sender_name``, ``timestamp_ms`` (UTC epoch in ms), ``content``,
media lists (``photos``, ``videos``, ``audio_files``, ``files``, ``gifs``, ``sticker``,
``share``); ``type`` ``Subscribe``/``Unsubscribe``/``Call`` are system messages, and so is a group
action stored as a ``Generic`` message ("Tom named the group ..."); an ``is_unsent`` message has
no content left: it is kept as the system line Messenger shows ("Max unsent a message"), as a
deleted WhatsApp message is; ``reactions`` (``[{reaction, actor}]``) are grouped by emoji. Every
string is UTF-8 bytes escaped as ``\\u00XX``: it is repaired with latin-1 -> utf-8 (strings that
are not such mojibake stay).

Streaming: a thread's files are read one at a time; each thread is one conversation.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from narrative_mirror.exports.archive import ExportTree, base_of, iter_with_index, load_json_file, parent_of
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
    optional_field,
    read_each,
)
from narrative_mirror.exports.timezones import ZoneChoice, epoch_to_utc
from narrative_mirror.reactions import reactions_of

FORMAT = "messenger"
MESSAGE_FILE = re.compile(r"^message_(\d+)\.json$")
SYSTEM_TYPES = frozenset({"Subscribe", "Unsubscribe", "Call"})
_GROUP_ACTION = re.compile(
    r"(?:named the group\b|changed the group (?:name|photo)\b|removed the group (?:name|photo)\b|"
    r"set (?:the|your|his|her|their) nickname\b|set the (?:quick reaction|emoji)\b|changed the (?:chat )?theme\b|"
    r"added .+ to the group\.?$|removed .+ from the group\.?$|left the group\.?$|"
    r"started (?:a|an) (?:audio |video )?call\b|joined the (?:audio |video )?call\b|"
    r"created (?:a|the) (?:group|poll|plan|reminder)\b)"
)
MEDIA_KINDS = (("photos", "photo"), ("videos", "video"), ("audio_files", "audio"), ("files", "file"), ("gifs", "gif"))


def fix_mojibake(value: Any) -> Any:
    """Undo the export's latin-1 escaping of UTF-8 in every string of ``value``."""
    if isinstance(value, str):
        try:
            return value.encode("latin-1").decode("utf-8")
        except (UnicodeEncodeError, UnicodeDecodeError):
            return value
    if isinstance(value, list):
        return [fix_mojibake(v) for v in value]
    if isinstance(value, dict):
        return {k: fix_mojibake(v) for k, v in value.items()}
    return value


def _file_number(name: str) -> int:
    match = MESSAGE_FILE.match(base_of(name))
    return int(match[1]) if match else 1


def read(path: Path, zone: ZoneChoice, on_progress: ProgressCallback | None) -> Iterator[Conversation]:
    # The file has UTC epochs and no zone: the chat is shown in --tz, else the machine's zone.
    shown = (zone.name, zone.source) if zone.zone is not None else ("UTC", TZ_FROM_FILE)
    if path.is_file() and path.suffix.lower() == ".json":
        folder = path.parent
        siblings = sorted(p for p in folder.iterdir() if MESSAGE_FILE.match(p.name))
        files = siblings if MESSAGE_FILE.match(path.name) else [path]
        thread = folder.name if MESSAGE_FILE.match(path.name) else path.stem
        yield _thread(thread, [(str(p), lambda p=p: load_json_file(p, folder)) for p in files], str(folder), shown)
        if on_progress is not None:
            on_progress(1, 1, thread)
        return
    tree = ExportTree(path)
    try:
        threads: dict[str, list[str]] = {}
        for name in tree.names():
            if MESSAGE_FILE.match(base_of(name)):
                threads.setdefault(parent_of(name), []).append(name)
        if not threads:
            raise ExportFormatError(path, None, "no message_N.json files: not a Messenger/Instagram export")
        for done, (folder, names) in enumerate(sorted(threads.items()), start=1):
            loaders = [(tree.label(n), lambda n=n: tree.load_json(n)) for n in names]
            yield _thread(base_of(folder) or path.stem, loaders, tree.label(folder), shown)
            if on_progress is not None:
                on_progress(done, len(threads), folder)
    finally:
        tree.close()


def _thread(thread: str, loaders: list, source: str, shown: tuple[str, str]) -> Conversation:
    """One thread from its files, read oldest file first, each reversed to oldest first."""
    title = ""
    participants: list[str] = []
    raw: list[tuple[int, str, dict]] = []
    for label, load in sorted(loaders, key=lambda pair: -_file_number(pair[0])):
        data = fix_mojibake(load())
        if not isinstance(data, dict):
            raise ExportFormatError(label, "$", "expected an object with messages")
        items = list(iter_with_index(json_field(data, "messages", "$", label, list), label, "messages"))
        raw.extend((index, label, item) for index, item in reversed(items))
        title = title or str(data.get("title") or "")
        for record in data.get("participants") or []:
            if isinstance(record, dict) and isinstance(record.get("name"), str):
                participants.append(record["name"])
    ids = StableIds()
    warnings: list[str] = []
    messages = read_each(
        ((f"messages[{index}]", (label, item)) for index, label, item in raw),
        lambda labelled, where: _message(labelled[1], where, labelled[0], ids, shown),
        "chat",
        warnings,
        none_read_raises=True,
    )
    messages.sort(key=lambda m: m.timestamp)
    if not participants:
        participants = list(dict.fromkeys(m.author for m in messages if not m.system))
    conversation = conversation_from_messages(
        # Instagram writes the same files; its download's folders say which app the chat is of
        key=conversation_key(
            "instagram" if "instagram" in source.lower() else FORMAT, title or ", ".join(participants) or thread
        ),
        title=title or ", ".join(participants) or thread,
        source_format=FORMAT,
        source=source,
        messages=messages,
        tz=shown[0],
        tz_source=shown[1],
        participants=dict.fromkeys(participants),
        native_id=thread,
    )
    conversation.warnings.extend(warnings)
    return conversation


def _message(item: Any, where: str, label: str, ids: StableIds, shown: tuple[str, str]) -> ExportedMessage:
    if not isinstance(item, dict):
        raise ExportFormatError(label, where, f"expected a message object, found {type(item).__name__}")
    author = json_field(item, "sender_name", where, label, str)
    unsent = bool(item.get("is_unsent")) and not item.get("content")
    millis = json_field(item, "timestamp_ms", where, label, int)
    try:
        utc = epoch_to_utc(millis / 1000)
    except (ValueError, OverflowError, OSError) as exc:
        raise ExportFormatError(label, f"{where}.timestamp_ms", f"bad timestamp {millis!r}") from exc
    text = f"{author} unsent a message" if unsent else item.get("content") or ""
    if not isinstance(text, str):
        raise ExportFormatError(label, f"{where}.content", f"expected str, found {text!r}")
    return ExportedMessage(
        local_id=ids.next_id(author, utc, text),
        author=author,
        timestamp=utc,
        tz=shown[0],
        tz_source=shown[1],
        text=text,
        attachments=_attachments(item, where, label),
        system=unsent
        or optional_field(item, "type", where, label, str, "Generic") in SYSTEM_TYPES
        or group_action(author, text)
        or "call_duration" in item  # "The audio call ended." (a call's end, its length in seconds)
        or bool(_REACTION_NOTICE.match(text)),
        reactions=reactions_of(
            (str(r.get("actor") or ""), str(r.get("reaction") or ""))
            for r in (item.get("reactions") if isinstance(item.get("reactions"), list) else [])
            if isinstance(r, dict)
        ),
    )


# Instagram stores a reaction as a message of its own: "Liked a message", "Reacted 😂 to your message"
_REACTION_NOTICE = re.compile(r"^\s*(?:Liked a message|Reacted \S{1,8} to (?:your|a) message)\s*$")


def group_action(author: str, text: str) -> bool:
    """Whether ``text`` is a line Messenger writes about its sender's action on the group, stored
    as an ordinary ("Generic") message: "Tom Ashworth named the group Whitby cousins.", "... changed
    the group photo.", "... added Zoë Clarke to the group." It starts with the sender's own name."""
    return text.startswith(author + " ") and bool(_GROUP_ACTION.match(text[len(author) + 1 :]))


def _attachments(item: dict, where: str, label: str) -> tuple[Attachment, ...]:
    found = []
    for field_name, kind in MEDIA_KINDS:
        for record in optional_field(item, field_name, where, label, list, []):
            if isinstance(record, dict):
                name = str(record.get("uri") or "").rsplit("/", 1)[-1]
                found.append(Attachment(kind if kind != "file" else kind_from_name(name), name, None))
    sticker = item.get("sticker")
    if isinstance(sticker, dict):
        found.append(Attachment("sticker", str(sticker.get("uri") or "").rsplit("/", 1)[-1], None))
    share = item.get("share")
    if isinstance(share, dict) and share.get("link"):
        found.append(Attachment("link", str(share["link"]), share.get("share_text") or None))
    return tuple(found)
