"""Local export times to UTC: which zone applies, how it was decided, and the DST rule.

Formats that write local times without a zone (WhatsApp, Signal, old Telegram exports) are read
in the zone the caller gives (``tz``, the CLI's ``--tz``) or else the machine's zone, which the
caller also passes in (``machine_tz``): the library never reads the environment.

DST: a local time inside a spring-forward gap is read with the offset in force before the change
(02:30 in a 02:00->03:00 gap is 03:30 new time); a time that occurs twice in a fall-back overlap is
the first of the two (``fold=0``). Both are Python's ``zoneinfo`` defaults, made explicit here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from narrative_mirror.exports.records import TZ_FROM_ARGUMENT, TZ_FROM_MACHINE, ExportFormatError


@dataclass(frozen=True)
class ZoneChoice:
    """The zone local times are read in (None when the caller gave none) and its origin."""

    zone: ZoneInfo | None
    name: str
    source: str

    def require(self, file: object) -> ZoneInfo:
        if self.zone is None:
            raise ExportFormatError(file, None, "the export has local times without a zone: pass a time zone (--tz)")
        return self.zone

    def to_utc(self, local: datetime, file: object, after: datetime | None = None) -> datetime:
        return local_to_utc(local, self.require(file), after)


def _zone(value: str | tzinfo, what: str) -> ZoneInfo:
    if isinstance(value, ZoneInfo):
        return value
    try:
        return ZoneInfo(str(value))
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {value!r} ({what})") from exc


def choose_zone(tz: str | tzinfo | None, machine_tz: str | tzinfo | None) -> ZoneChoice:
    """``tz`` when given ("--tz"), else ``machine_tz`` ("machine"), else no zone yet."""
    if tz is not None:
        zone = _zone(tz, "tz")
        return ZoneChoice(zone, zone.key, TZ_FROM_ARGUMENT)
    if machine_tz is not None:
        zone = _zone(machine_tz, "machine_tz")
        return ZoneChoice(zone, zone.key, TZ_FROM_MACHINE)
    return ZoneChoice(None, "", TZ_FROM_MACHINE)


def local_to_utc(local: datetime, zone: ZoneInfo, after: datetime | None = None) -> datetime:
    """A naive local time in ``zone`` as UTC (gap: offset before the change). In the hour that
    repeats when clocks go back, the first pass, unless that would put it before ``after`` (the
    previous message's UTC time, for a file written in sending order): then the second pass."""
    first = local.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if after is not None and first < after:
        second = local.replace(tzinfo=zone, fold=1).astimezone(UTC)
        if second != first:
            return second
    return first


def epoch_to_utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def offset_name(offset: timedelta | None) -> str:
    """``UTC``, ``UTC+02:00``, ``UTC-05:30``: the name of a fixed offset carried by a file."""
    if not offset:
        return "UTC"
    sign = "+" if offset >= timedelta(0) else "-"
    minutes = abs(int(offset.total_seconds())) // 60
    return f"UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def file_zone_of(moment: datetime) -> str:
    """The zone name of an aware time read from the file (its fixed offset)."""
    return offset_name(moment.utcoffset())


_OFFSET_NAME = re.compile(r"^UTC([+-])(\d{2}):(\d{2})$")


def zone_named(name: str) -> tzinfo:
    """The zone a message records (``Europe/Berlin``, ``UTC+02:00``, ``UTC``) as a tzinfo."""
    match = _OFFSET_NAME.match(name)
    if match is not None:
        minutes = int(match[2]) * 60 + int(match[3])
        return timezone(timedelta(minutes=minutes if match[1] == "+" else -minutes))
    if name in ("", "UTC"):
        return UTC
    return _zone(name, "recorded zone")


def zone_of_offsets(stamps: list[tuple[datetime, str]], recorded: str, zone: ZoneInfo | None) -> str:
    """A chat's zone label from the offsets its file records (``stamps``: each message's UTC time
    and the offset name it records; ``recorded``: the reader's choice, the first one's): the zone
    the user gave when it explains every offset (a chat across a clock change is "Europe/London",
    not the "UTC" of its winter half); else the offsets seen, when more than one ("UTC+00:00 /
    UTC+01:00")."""
    names = list(dict.fromkeys(name for _, name in stamps))
    if len(names) <= 1:
        return recorded
    if zone is not None and all(
        moment.astimezone(zone).utcoffset() == moment.astimezone(zone_named(name)).utcoffset()
        for moment, name in stamps
    ):
        return zone.key
    return " / ".join(names)
