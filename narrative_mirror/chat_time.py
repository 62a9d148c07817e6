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

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path

import polars as pl

from narrative_mirror import storage


def _zone(name: str) -> tzinfo | None:
    """The zone a stored ``tz`` names (the readers' own reading of it); None when this machine
    does not know the name."""
    from narrative_mirror.exports.timezones import zone_named  # the readers' package: only when a chat has zones

    try:
        return zone_named(name)
    except ValueError:
        return None


def _fixed(zone: tzinfo | None) -> bool:
    """A fixed offset the file wrote (``UTC+02:00``), not a place's zone (nor plain UTC)."""
    return isinstance(zone, timezone) and zone.utcoffset(None) != timedelta(0)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class ChatClock:
    """One chat's message times in its zone. ``zones``: the zone names its times are shown in,
    most used first (empty: the chat records no zone). Each message's local time is made when
    asked for (a transcript asks for all, an answer for a few)."""

    zones: tuple[str, ...] = ()
    rows: dict[str, int] = field(default_factory=dict)  # local id -> row of ``micros`` / ``zone_of``
    micros: Sequence[int] = ()  # the instant, microseconds since the epoch
    zone_of: Sequence[tzinfo] = ()  # the zone it is shown in

    def local(self, local_id: str) -> datetime | None:
        """The message's aware local time; None when the chat records no instant for it."""
        row = self.rows.get(local_id)
        if row is None:
            return None
        return (EPOCH + timedelta(microseconds=int(self.micros[row]))).astimezone(self.zone_of[row])

    def time(self, local_id: str, written: datetime | None) -> datetime | None:
        """The message's time in the chat's zone; ``written`` (as stored) when it has no instant."""
        local = self.local(local_id)
        return written if local is None else local

    def iso(self, local_id: str, written: datetime | str | None) -> str | None:
        """The message's time as ISO 8601, with its offset when the chat records one."""
        local = self.time(local_id, written if isinstance(written, datetime) else None)
        return local.isoformat() if local is not None else written

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
    rows = messages.select("local_id", "utc_time", pl.col("tz").fill_null("").str.strip_chars()).filter(
        pl.col("utc_time").is_not_null()
    )
    if rows["utc_time"].dtype.time_zone is None:  # a frame written without its zone holds UTC instants
        rows = rows.with_columns(pl.col("utc_time").dt.replace_time_zone("UTC"))
    names = rows["tz"].to_list()
    counts = Counter(names)
    known = {n: _zone(n) for n in counts}
    named = [n for n, _ in counts.most_common() if n and known[n] is not None and not _fixed(known[n])]
    chat_name = named[0] if named else "UTC"
    shown_as = {n: n if _fixed(known[n]) else chat_name for n in counts}
    zones = {n: _zone(n) or UTC for n in set(shown_as.values())}
    shown: Counter[str] = Counter()
    for name, count in counts.items():
        shown[shown_as[name]] += count
    return ChatClock(
        tuple(n for n, _ in shown.most_common()),
        {lid: i for i, lid in enumerate(rows["local_id"].to_list())},
        rows["utc_time"].dt.epoch("us").to_numpy(),
        [zones[shown_as[n]] for n in names],
    )


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
        local = clocks(item.get("chat") or default_chat).local(item.get("id"))
        if local is not None:
            item["timestamp"] = local.isoformat()
            used[zone_name(local)] += 1
    return [name for name, _ in used.most_common()]
