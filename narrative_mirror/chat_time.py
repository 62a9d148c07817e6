"""A chat's times as its people saw them: each message's instant (``utc_time`` of the stored
messages layer) in the zone the chat recorded (``tz``), written with its offset
(``2024-03-12T09:20:41+01:00``). The inspector, the command line's printed times and the JSON of
answers and arcs all read them from here.

The chat's zone is its messages' most used named zone (a WhatsApp chat's ``--tz`` or machine
zone, a Slack workspace's users' zone); a message whose file wrote a fixed offset
(``UTC+02:00``: Telegram's local times) is shown at that offset, as the file wrote it. A chat
that records no instant (RealTalk, LoCoMo) keeps its times as the file wrote them, without offset.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl

from narrative_mirror import storage

_FIXED = re.compile(r"^UTC([+-])(\d{2}):(\d{2})$")


def zone_named(name: str | None) -> tzinfo | None:
    """The zone a stored ``tz`` names: an IANA name, ``UTC`` or a fixed ``UTC+02:00``; None
    for "" or a name this machine does not know."""
    name = (name or "").strip()
    fixed = _FIXED.match(name)
    if fixed:
        sign = -1 if fixed[1] == "-" else 1
        return timezone(sign * timedelta(hours=int(fixed[2]), minutes=int(fixed[3])), name)
    if name == "UTC":
        return UTC
    try:
        return ZoneInfo(name) if name else None
    except (ZoneInfoNotFoundError, ValueError):
        return None


@dataclass(frozen=True)
class ChatClock:
    """One chat's message times in its zone. ``zones``: the zone names its times are shown in,
    most used first (empty: the chat records no zone); ``local``: local id -> aware local time."""

    zones: tuple[str, ...] = ()
    local: dict[str, datetime] = field(default_factory=dict)

    def time(self, local_id: str, written: datetime | None) -> datetime | None:
        """The message's time in the chat's zone; ``written`` (as stored) when it has no instant."""
        return self.local.get(local_id, written)

    def iso(self, local_id: str, written: datetime | str | None) -> str | None:
        """The message's time as ISO 8601, with its offset when the chat records one."""
        if local_id in self.local:
            return self.local[local_id].isoformat()
        return written.isoformat() if isinstance(written, datetime) else written

    @property
    def label(self) -> str:
        """What the times are, said once per page: ``times in Europe/Lisbon``."""
        if not self.zones:
            return "times as the chat file wrote them (it records no time zone)"
        return "times in " + " and ".join(self.zones)


def chat_clock(messages: pl.DataFrame) -> ChatClock:
    """The clock of a stored messages layer (``schema.MESSAGE_RECORD``; a frame without
    ``utc_time`` / ``tz`` records no zone)."""
    if not {"local_id", "utc_time", "tz"} <= set(messages.columns):
        return ChatClock()
    rows = messages.select("local_id", "utc_time", "tz").filter(pl.col("utc_time").is_not_null())
    names = [(name or "").strip() for name in rows["tz"].to_list()]
    named = Counter(n for n in names if n and not _FIXED.match(n) and zone_named(n) is not None)
    chat_name = named.most_common(1)[0][0] if named else "UTC"
    local: dict[str, datetime] = {}
    shown: Counter[str] = Counter()
    for local_id, instant, name in zip(rows["local_id"].to_list(), rows["utc_time"].to_list(), names):
        zone = zone_named(name if _FIXED.match(name) else chat_name) or UTC
        if instant.tzinfo is None:  # a frame written without its zone holds UTC instants
            instant = instant.replace(tzinfo=UTC)
        local[local_id] = instant.astimezone(zone)
        shown[zone_name(local[local_id])] += 1
    return ChatClock(tuple(name for name, _ in shown.most_common()), local)


class StoredClocks:
    """``clock(chat)`` from the stored messages layers under ``storage_dir``
    (``NM_HOME/storage``), read again when a layer's file changes. A chat without a readable
    stored layer has the empty clock (times as written)."""

    def __init__(self, storage_dir: Path):
        self.storage_dir = Path(storage_dir)
        self._lock = threading.Lock()
        self._kept: dict[str, tuple[tuple, ChatClock]] = {}

    def __call__(self, chat: str) -> ChatClock:
        path = storage.frame_path(self.storage_dir, "messages", chat)
        try:
            stat = path.stat()
        except OSError:
            return ChatClock()
        stamp = (stat.st_mtime_ns, stat.st_size)
        with self._lock:
            kept = self._kept.get(chat)
        if kept is not None and kept[0] == stamp:
            return kept[1]
        try:
            clock = chat_clock(pl.read_parquet(path, columns=["local_id", "utc_time", "tz"]))
        except Exception:  # a damaged or older layer: the self-check's business; times stay as written
            clock = ChatClock()
        with self._lock:
            self._kept[chat] = (stamp, clock)
        return clock


Clocks = Callable[[str], ChatClock]


def zone_name(value: datetime) -> str:
    """The name of an aware time's zone (``Europe/Lisbon``, ``UTC+02:00``, ``UTC``)."""
    return getattr(value.tzinfo, "key", None) or value.tzname() or ""


def stamp_messages(items: list[dict], clocks: Clocks, default_chat: str) -> list[str]:
    """Rewrite each item's ``timestamp`` (a message's time, found by its ``id`` and ``chat``) as
    ISO 8601 in its chat's zone, in place; returns the zone names used, most used first."""
    used: Counter[str] = Counter()
    for item in items:
        local = clocks(item.get("chat") or default_chat).local.get(item.get("id"))
        if local is not None:
            item["timestamp"] = local.isoformat()
            used[zone_name(local)] += 1
    return [name for name, _ in used.most_common()]
