"""The record every export reader produces: conversations of messages, with stable ids and keys.

Every format reads into the same two types: :class:`Conversation` (one chat, channel or thread,
with a partition key that stays the same across re-exports) and :class:`ExportedMessage` (one
message, UTC time, the zone it came from and how that zone was decided). Bad input raises
:class:`ExportFormatError` naming the file, the line or JSON path, and what is wrong.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, NamedTuple

from narrative_mirror.keys import MAX_KEY_LENGTH, validate_partition_key
from narrative_mirror.reactions import Reaction

FORMATS = ("whatsapp", "telegram", "slack", "discord", "messenger", "signal")

# How a message's zone was decided: carried by the file (offset or epoch), given by the caller
# (the CLI's --tz), or the machine's zone the caller passed as the default.
TZ_FROM_FILE = "file"
TZ_FROM_ARGUMENT = "--tz"
TZ_FROM_MACHINE = "machine"

ProgressCallback = Callable[[int, "int | None", str], None]


class ExportFormatError(ValueError):
    """An export that cannot be read: names the file, the line or JSON path, and what is wrong."""

    def __init__(self, file: object, where: str | int | None, problem: str):
        self.file = str(file)
        self.where = where
        self.problem = problem
        if where is None or where == "":
            located = self.file
        elif isinstance(where, int):
            located = f"{self.file}: line {where}"
        else:
            located = f"{self.file}: {where}"
        super().__init__(f"{located}: {problem}")


def left_out_line(error: ExportFormatError, message: str, container: str) -> str:
    """The one warning line for a message a reader leaves out: the error, which message, and
    that the rest is read (``... (message ts 17.0 left out; the rest of the channel is read)``)."""
    return f"{error} (message {message} left out; the rest of the {container} is read)"


def read_each(
    items: Iterable[tuple[str, Any]],
    read_one: Callable[[Any, str], Any],
    container: str,
    warnings: list[str],
    name_of: Callable[[Any, str], str] | None = None,
    none_read_raises: bool = False,
) -> list[Any]:
    """``read_one(item, where)`` for each ``(where, item)``, None results dropped. A message that
    cannot be read is one line in ``warnings`` (``name_of(item, where)`` names it, else ``where``)
    and the rest are read; an error about the whole file (no ``where``) is raised, and so is the
    first error when ``none_read_raises`` and no message could be read (not a chat: a wrong file)."""
    read, first_error = [], None
    for where, item in items:
        try:
            message = read_one(item, where)
        except ExportFormatError as exc:
            if exc.where is None or exc.where == "":
                raise
            first_error = first_error or exc
            warnings.append(left_out_line(exc, name_of(item, where) if name_of else where, container))
            continue
        if message is not None:
            read.append(message)
    if none_read_raises and first_error is not None and not read:
        raise first_error
    return read


class Attachment(NamedTuple):
    kind: str  # photo, video, audio, sticker, gif, document, contact, location, link, file, media
    name: str  # file name (or link); "" when the export only says that something was attached
    caption: str | None = None


@dataclass(frozen=True)
class ExportedMessage:
    local_id: str  # native id (Telegram id, Slack ts, Discord id) else a stable content id
    author: str  # "" for system lines that name nobody
    timestamp: datetime  # UTC, tz-aware
    tz: str  # the zone (or fixed offset "UTC+02:00") the time came from
    tz_source: str  # TZ_FROM_FILE, TZ_FROM_ARGUMENT or TZ_FROM_MACHINE
    text: str
    reply_to: str | None = None  # local_id of the message this one answers
    attachments: tuple[Attachment, ...] = ()
    edited: bool = False
    system: bool = False  # joins, calls, group changes: kept in the transcript, out of retrieval
    bot: bool = False  # written by a bot account (Slack bot_message, Discord isBot)
    reactions: tuple[Reaction, ...] = ()


def resolve_pins(messages: list[ExportedMessage], pins: dict[str, str]) -> list[ExportedMessage]:
    """Each pin line (``pins``: its local id -> the pinned message's local id) as ``Ann pinned a
    message: "<its text>"`` replying to it, when ``messages`` hold it; else left as it is. Run once
    a chat is read: a pinned message may stand after its pin line."""
    wanted = set(pins.values())
    pinned = {m.local_id: m for m in messages if m.local_id in wanted}
    resolved = []
    for message in messages:
        target = pinned.get(pins.get(message.local_id, "")) if message.system else None
        if target is not None:
            line = f"{message.author or 'Someone'} pinned a message{pin_gist(target)}"
            message = replace(message, text=line, reply_to=target.local_id)
        resolved.append(message)
    return resolved


def pin_gist(message: ExportedMessage, limit: int = 80) -> str:
    """What a pin line adds about the pinned message: ``: "its text"`` (whitespace collapsed, cut
    to ``limit`` characters with "…"), else `` (photo)`` for media without text, else ""."""
    text = " ".join(message.text.split()) or next(
        (" ".join(a.caption.split()) for a in message.attachments if a.caption), ""
    )
    if text:
        return f': "{text if len(text) <= limit else text[: limit - 1].rstrip() + "…"}"'
    return f" ({message.attachments[0].kind})" if message.attachments else ""


@dataclass(frozen=True)
class Conversation:
    """One chat/channel/thread of an export.

    ``messages()`` returns a fresh iterator each call. Slack conversations read their day files
    lazily (memory bounded by one day file); the other formats hold their messages as a tuple
    (one chat file, or one chat of a streamed archive, is in memory at a time).
    """

    key: str  # partition key: validated by narrative_mirror.keys, stable across re-exports
    title: str
    participants: tuple[str, ...]
    source_format: str
    tz: str
    tz_source: str
    source: str  # the file/folder (and member) it was read from, for messages naming it
    _read: Callable[[], Iterable[ExportedMessage]] = field(repr=False, compare=False)
    # The export's own id of the chat (channel or chat id, thread folder); "" when it has none.
    # Sets apart chats whose names give the same key (``unique_key``).
    native_id: str = ""
    # One line per message the last messages() pass left out (unreadable), naming file and message.
    warnings: list[str] = field(default_factory=list, repr=False, compare=False)

    def messages(self) -> Iterator[ExportedMessage]:
        return iter(self._read())


def conversation_from_messages(
    *,
    key: str,
    title: str,
    source_format: str,
    source: str,
    messages: list[ExportedMessage],
    tz: str,
    tz_source: str,
    participants: Iterable[str] | None = None,
    native_id: str = "",
) -> Conversation:
    """A conversation held in memory; participants default to the authors in order who are people
    (not system lines, not bots)."""
    frozen = tuple(messages)
    if participants is None:
        participants = dict.fromkeys(m.author for m in frozen if m.author and not m.system and not m.bot)
    return Conversation(
        key=key,
        title=title,
        participants=tuple(participants),
        source_format=source_format,
        tz=tz,
        tz_source=tz_source,
        source=source,
        _read=lambda: frozen,
        native_id=native_id,
    )


class StableIds:
    """Content ids for formats without message ids: (author, UTC time, text, occurrence number).

    The occurrence number counts identical (author, time, text) triples from the start of the
    chat, so a longer re-export (new messages appended) gives every old message the same id.
    """

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str, str], int] = {}

    def next_id(self, author: str, timestamp: datetime, text: str) -> str:
        triple = (author, timestamp.isoformat(), text)
        occurrence = self._seen.get(triple, 0)
        self._seen[triple] = occurrence + 1
        payload = "\x1f".join((*triple, str(occurrence)))
        return "h" + hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


_NOT_SLUG = re.compile(r"[^a-z0-9-]+")
# Room left in a key for the suffix that sets apart chats of the same name (see ``unique_key``).
SUFFIX_LENGTH = 7


def conversation_key(source_format: str, name: str) -> str:
    """Readable partition key ``<format>_<slug of the chat's own name>``: ``whatsapp_family_trip``.

    The name is folded to lower-case ASCII (accents dropped, emoji and punctuation become ``_``),
    so the same name always gives the same key. A name with nothing left (emoji only, a script
    without ASCII folding) gives a short hash of the exact name. Two chats of one data folder
    whose names give the same key are set apart by the folder (``unique_key``)."""
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii").lower()
    slug = _NOT_SLUG.sub("_", folded).strip("_-")
    if not slug:
        slug = "h" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]
    room = MAX_KEY_LENGTH - len(source_format) - 1 - SUFFIX_LENGTH
    slug = slug[:room].rstrip("_-")
    return validate_partition_key(f"{source_format}_{slug}", source=repr(name))


def unique_key(key: str, identity: str) -> str:
    """``key`` with a short suffix derived from the chat's ``identity`` (its native id, else its
    export's file name): what the folder gives each of several chats whose names share a key."""
    return f"{key}-{hashlib.sha256(identity.encode('utf-8')).hexdigest()[: SUFFIX_LENGTH - 1]}"


_KIND_BY_EXTENSION = {
    "photo": ("jpg", "jpeg", "png", "heic", "heif", "webp", "bmp"),
    "gif": ("gif",),
    "video": ("mp4", "mov", "3gp", "mkv", "avi", "webm"),
    "audio": ("opus", "ogg", "mp3", "m4a", "aac", "wav", "amr"),
    "document": ("pdf", "doc", "docx", "xls", "xlsx", "ppt", "pptx", "txt", "csv", "odt"),
    "contact": ("vcf",),
}


def kind_from_name(name: str, default: str = "file") -> str:
    """Attachment kind from a file name's extension (``default`` when unknown); WhatsApp names a
    sticker ``STK-<date>-WA0001.webp``."""
    if name.startswith("STK-"):
        return "sticker"
    extension = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    for kind, extensions in _KIND_BY_EXTENSION.items():
        if extension in extensions:
            return kind
    return default


def json_field(obj: Any, key: str, path: str, file: object, types: type | tuple[type, ...]) -> Any:
    """``obj[key]`` checked to be of ``types``; a missing or mistyped field names its JSON path."""
    if not isinstance(obj, dict):
        raise ExportFormatError(file, path, f"expected an object, found {type(obj).__name__}")
    if key not in obj or obj[key] is None:
        raise ExportFormatError(file, f"{path}.{key}", "missing")
    value = obj[key]
    if not isinstance(value, types) or isinstance(value, bool) and bool not in _as_tuple(types):
        raise ExportFormatError(file, f"{path}.{key}", f"expected {_type_names(types)}, found {value!r}")
    return value


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _type_names(types: type | tuple[type, ...]) -> str:
    return " or ".join(t.__name__ for t in _as_tuple(types))


def optional_field(obj: dict, key: str, path: str, file: object, types: type | tuple[type, ...], default: Any) -> Any:
    """``obj[key]`` when present and not null (checked like :func:`json_field`), else ``default``."""
    if obj.get(key) is None:
        return default
    return json_field(obj, key, path, file, types)
