"""The time a question names, read by rules against one chat's span (no LLM).

Dates ("29 Dec 2023", "December 30, 2023", "30.12.2023", "2023-12-30"), months ("in January",
"January 2024"), weeks of a month ("first week of January"), holidays ("New Year", "Christmas",
"Valentine's Day", "Halloween"), years ("in 2023"), each optionally after "before"/"after"/
"since"/"until"; and weekdays ("on Monday"). A month or day without a year takes the year(s) in
which it falls inside the chat's time span (chats are historical: "now" means nothing). Windows
are half-open [start, end); None = unbounded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

MONTHS = {
    name: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for name in names
}
WEEKDAYS = {d: i for i, d in enumerate(["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"])}

# Month names only when capitalized ("may" is a verb); "May" also needs a date-like neighbour.
_MONTH = r"(?P<month>(?:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)[a-z]*\.?|May)"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d{2})"
_PREFIX = r"(?:(?P<rel>before|after|since|until|till|by)\s+(?:the\s+)?)?"
_ORDINAL_WEEK = {"first": 0, "1st": 0, "second": 1, "2nd": 1, "third": 2, "3rd": 2, "fourth": 3, "4th": 3, "last": -1}
_HOLIDAYS = [
    # (pattern, month, day, days before it, days long): "New Year 2025" starts on its eve.
    (r"new\s+year'?s\s+eve", 12, 31, 0, 1),
    (r"new\s+year'?s?(?:\s+day)?", 1, 1, 1, 2),
    (r"christmas\s+eve", 12, 24, 0, 1),
    (r"christmas|xmas", 12, 24, 0, 3),
    (r"valentine'?s?(?:\s+day)?", 2, 14, 0, 1),
    (r"halloween", 10, 31, 0, 1),
]

_PATTERNS = [
    ("date", re.compile(_PREFIX + r"\b(?P<y>(?:19|20)\d{2})-(?P<m>\d{2})-(?P<d>\d{2})\b", re.I)),
    ("date", re.compile(_PREFIX + r"\b(?P<d>\d{1,2})\.(?P<m>\d{1,2})\.(?P<y>(?:19|20)\d{2})\b", re.I)),
    ("day_month", re.compile(_PREFIX + r"\b" + _DAY + r"\s+(?:of\s+)?" + _MONTH + r"(?:,?\s+" + _YEAR + r")?\b")),
    ("month_day", re.compile(_PREFIX + r"\b" + _MONTH + r"\s+" + _DAY + r"\b(?:,?\s+" + _YEAR + r")?")),
    (
        "week",
        re.compile(
            _PREFIX
            + r"\b(?P<ord>first|1st|second|2nd|third|3rd|fourth|4th|last)\s+week\s+of\s+"
            + _MONTH
            + r"(?:,?\s+"
            + _YEAR
            + r")?\b"
        ),
    ),
    (
        "holiday",
        re.compile(
            _PREFIX + r"\b(?P<holiday>" + "|".join(p for p, *_ in _HOLIDAYS) + r")(?:\s+" + _YEAR + r")?\b", re.I
        ),
    ),
    (
        "month",
        re.compile(
            _PREFIX + r"\b(?:(?P<ctx>in|of|during|early|mid|late)\s+)?" + _MONTH + r"(?:,?\s+" + _YEAR + r")?\b"
        ),
    ),
    ("year", re.compile(_PREFIX + r"\b(?:in|of|during)?\s*" + _YEAR + r"\b", re.I)),
]
_WEEKDAY = re.compile(r"\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b", re.I)


@dataclass(frozen=True)
class TimeWindow:
    start: datetime | None  # inclusive; None = open
    end: datetime | None  # exclusive; None = open
    expression: str  # the text it was read from


def _years(month: int, chat_start: datetime | None, chat_end: datetime | None) -> list[int]:
    """Years whose ``month`` overlaps the chat span, else the last such year before its end."""
    if chat_start is None or chat_end is None:
        return []
    years = [
        y
        for y in range(chat_start.year, chat_end.year + 1)
        if datetime(y, month, 1) <= chat_end and _month_end(y, month) > chat_start
    ]
    return years or [chat_end.year if month <= chat_end.month else chat_end.year - 1]


def _month_end(year: int, month: int) -> datetime:
    return datetime(year + month // 12, month % 12 + 1, 1)


def _month_number(token: str) -> int:
    return MONTHS[token.rstrip(".").lower()[:3] if token.lower() != "sept" else "sep"]


def _windows_for(
    kind: str, m: re.Match, chat_start: datetime | None, chat_end: datetime | None
) -> list[tuple[datetime, datetime]]:
    g = m.groupdict()
    year = int(g["year"]) if g.get("year") else None
    if kind == "date":
        try:
            day = datetime(int(g["y"]), int(g["m"]), int(g["d"]))
        except ValueError:
            return []
        return [(day, day + timedelta(days=1))]
    if kind in ("day_month", "month_day"):
        month, day = _month_number(g["month"]), int(g["day"])
        out = []
        for y in [year] if year else _years(month, chat_start, chat_end):
            try:
                start = datetime(y, month, day)
            except ValueError:
                continue
            out.append((start, start + timedelta(days=1)))
        return out
    if kind == "week":
        month, index = _month_number(g["month"]), _ORDINAL_WEEK[g["ord"].lower()]
        out = []
        for y in [year] if year else _years(month, chat_start, chat_end):
            end_of_month = _month_end(y, month)
            start = end_of_month - timedelta(days=7) if index < 0 else datetime(y, month, 1) + timedelta(days=7 * index)
            out.append((start, min(start + timedelta(days=7), end_of_month)))
        return out
    if kind == "holiday":
        name = g["holiday"].lower()
        month, day, before, days = next(h[1:] for h in _HOLIDAYS if re.fullmatch(h[0], name))
        out = []
        for y in [year] if year else _years(month, chat_start, chat_end):
            start = datetime(y, month, day) - timedelta(days=before)
            out.append((start, start + timedelta(days=days)))
        return out
    if kind == "month":
        if g["month"] == "May" and not (g.get("ctx") or year or g.get("rel")):
            return []  # "May" as a modal verb
        month = _month_number(g["month"])
        return [
            (datetime(y, month, 1), _month_end(y, month))
            for y in ([year] if year else _years(month, chat_start, chat_end))
        ]
    if kind == "year":
        return [(datetime(year, 1, 1), datetime(year + 1, 1, 1))]
    raise ValueError(kind)


def time_windows(query: str, chat_start: datetime | None = None, chat_end: datetime | None = None) -> list[TimeWindow]:
    """Time windows named in ``query`` (see the module doc), in order of appearance."""
    taken = [False] * len(query)
    found: list[tuple[int, TimeWindow]] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(query):
            if any(taken[m.start() : m.end()]):
                continue
            spans = _windows_for(kind, m, chat_start, chat_end)
            if not spans:
                continue
            taken[m.start() : m.end()] = [True] * (m.end() - m.start())
            rel = (m.group("rel") or "").lower()
            expression = m.group(0).strip()
            for start, end in spans:
                if rel in ("after", "since"):
                    window = TimeWindow(end if rel == "after" else start, None, expression)
                elif rel in ("before", "until", "till", "by"):
                    window = TimeWindow(None, start if rel == "before" else end, expression)
                else:
                    window = TimeWindow(start, end, expression)
                found.append((m.start(), window))
    found.sort(key=lambda item: item[0])
    return [w for _, w in found]


def weekdays(query: str) -> list[int]:
    return list(dict.fromkeys(WEEKDAYS[w.lower()] for w in _WEEKDAY.findall(query)))
