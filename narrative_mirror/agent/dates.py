"""Dates a message speaks of, resolved against when it was said: "next Tuesday" said on Fri 7
June 2024 is 11 June 2024, "last night" is the day before, "Sunday the 19th" the next Sunday
that is a 19th; weeks and years a speaker counts are kept as said, from that day ("2 weeks before
6 January 2024"); habits ("every year") and times of life ("when I was in high school") as written.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from narrative_mirror.layers.text import straight_apostrophes
from narrative_mirror.retrieval.query_time import MONTHS

MONTH_NUMBERS = MONTHS  # month names and abbreviations -> 1..12, as the query's time reader has them
MONTH_NAMES = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
WEEKDAY_NUMBERS = {
    d: i for i, d in enumerate(["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"])
}
NUMBER_WORDS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a": 1,
    "an": 1,
}
_MONTH = r"(?P<month>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d{2})"
_WEEKDAY = r"(?P<weekday>monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_COUNT = r"(?P<count>\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|a|an)"
_UNIT = r"(?P<unit>day|week|month|year)s?"
# (kind, pattern) in order of preference: the most exact dates first.
_DATES = [
    ("iso", re.compile(r"\b(?P<year>(?:19|20)\d{2})-(?P<m>\d{2})-(?P<d>\d{2})\b")),
    ("dotted", re.compile(r"\b(?P<d>\d{1,2})\.(?P<m>\d{1,2})\.(?P<year>(?:19|20)\d{2})\b")),
    ("day_month", re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}\b(?:,?\s+{_YEAR})?", re.I)),
    ("month_day", re.compile(rf"\b{_MONTH}\.?\s+{_DAY}\b(?:,?\s+{_YEAR})?", re.I)),
    ("weekday_day", re.compile(rf"\b{_WEEKDAY},?\s+(?:the\s+)?{_DAY}\b(?!\s+(?:of\s+)?{_MONTH})", re.I)),
    # "on the 20th": a day of the month alone, not "the 1st year" or "the 3rd floor"
    (
        "month_day_only",
        re.compile(
            r"\b(?:on|by|until|till)\s+the\s+(?P<day>\d{1,2})(?:st|nd|rd|th)\b"
            rf"(?!\s+(?:of\s+)?{_MONTH})(?!\s+(?:time|year|day|week|month|floor|grade|place|round|one|of)\b)",
            re.I,
        ),
    ),
    (
        "relative_day",
        re.compile(
            r"\b(?P<word>day before yesterday|yesterday|last night|today|tonight|this morning|"
            r"this afternoon|this evening|tomorrow|tmrw|tmr)\b",
            re.I,
        ),
    ),
    ("ago", re.compile(rf"\b{_COUNT}\s+{_UNIT}\s+ago\b", re.I)),
    (
        "vague_ago",
        re.compile(
            r"\b(?P<amount>a\s+couple\s+of|a\s+few|several|many)\s+(?P<unit>days|weeks|months|years)\s+ago\b", re.I
        ),
    ),
    ("in_count", re.compile(rf"\bin\s+{_COUNT}\s+{_UNIT}\b", re.I)),
    (
        "vague_in",
        re.compile(r"\bin\s+(?P<amount>a\s+couple\s+of|a\s+few|several)\s+(?P<unit>days|weeks|months|years)\b", re.I),
    ),
    ("weekday", re.compile(rf"\b(?P<rel>next|last|this|on|coming)?\s*{_WEEKDAY}\b", re.I)),
    ("relative_period", re.compile(r"\b(?P<rel>last|next|this)\s+(?P<period>week|weekend|month|year)\b", re.I)),
    (
        "holiday",
        re.compile(
            r"\b(?P<holiday>christmas eve|christmas|new year'?s eve|new year'?s day|new year|"
            r"valentine'?s day|halloween|thanksgiving)\b",
            re.I,
        ),
    ),
    ("month_year", re.compile(rf"\b{_MONTH}\b(?:\s+of)?\s+{_YEAR}\b", re.I)),
    ("season", re.compile(rf"\b(?P<season>spring|summer|fall|autumn|winter)\b(?:\s+(?:of\s+)?{_YEAR})?", re.I)),
    ("month", re.compile(rf"\b(?:in|since|until|by|early|late|mid|during|last|next|this)\s+{_MONTH}\b", re.I)),
    ("year", re.compile(rf"\b{_YEAR}\b")),
    # no date, a time all the same: a habit ("every year I carve pumpkins"), a time of life
    (
        "habit",
        re.compile(
            r"\bevery\s+(?:other\s+|single\s+)?(?:day|week|weekend|month|year|summer|winter|spring|fall|"
            r"autumn|morning|evening|night|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
            re.I,
        ),
    ),
    (
        "life_period",
        re.compile(
            r"\b(?:(?:when|while)\s+(?:i|we|he|she|they)\s+(?:was|were)\s+(?:(?:in|at)\s+)?"
            r"(?:a\s+)?(?:kids?|little|young|younger|child|children|teenagers?|high\s+school|"
            r"middle\s+school|college|university|uni)|as\s+(?:a\s+)?(?:kids?|child|children|teenagers?)|"
            r"growing\s+up|in\s+(?:high|middle|elementary)\s+school|in\s+college)\b",
            re.I,
        ),
    ),
]
# A full date as written, its year included ("02.01.2024", "2 January, 2024", "Jan 2, 2024").
WRITTEN_DAYS = (
    re.compile(r"\b(?P<d>\d{1,2})\.(?P<m>\d{1,2})\.(?P<year>(?:19|20)\d{2})\b"),
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}\b,?\s+{_YEAR}\b", re.I),
    re.compile(rf"\b{_MONTH}\.?,?\s+{_DAY}\b,?\s+{_YEAR}\b", re.I),
)
_SEASON_MONTH = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}


def fmt_day(day: datetime) -> str:
    return f"{day.day} {MONTH_NAMES[day.month - 1]} {day.year}"


def _near_year(month: int, day: int, said: datetime) -> int:
    """The year that puts month/day closest to when it was said."""
    candidates = []
    for year in (said.year - 1, said.year, said.year + 1):
        try:
            candidates.append((abs((datetime(year, month, min(day, 28)) - said).days), year))
        except ValueError:
            continue
    return min(candidates)[1]


def _count(word: str) -> int:
    return int(word) if word.isdigit() else NUMBER_WORDS.get(word.lower(), 1)


def _future(sentence: str) -> bool:
    return bool(
        re.search(
            r"\b(?:will|'ll|going to|gonna|plan|planning|next|coming|tomorrow|can't wait|"
            r"looking forward|hope to|want to|about to)\b",
            sentence,
            re.I,
        )
    )


def resolve_date(sentence: str, said: datetime | None, habits: bool = True) -> str | None:
    """The date or period a sentence speaks of, resolved against when it was said; None if it
    names none. ``habits``: whether "every year" counts (it answers "when does she ...", not
    "when did she ...")."""
    for kind, pattern in _DATES:
        if kind == "habit" and not habits:
            continue
        for match in pattern.finditer(straight_apostrophes(sentence)):
            resolved = _resolve(kind, match, sentence, said)
            if resolved:
                return resolved
    return None


def _resolve(kind: str, m: re.Match, sentence: str, said: datetime | None) -> str | None:
    g = m.groupdict()
    if kind in ("iso", "dotted"):
        try:
            return fmt_day(datetime(int(g["year"]), int(g["m"]), int(g["d"])))
        except ValueError:
            return None
    if kind in ("day_month", "month_day"):
        month, day = MONTH_NUMBERS[g["month"].lower()], int(g["day"])
        if g.get("month", "").lower() == "may" and not g.get("year") and kind == "month_day" and day > 31:
            return None
        year = int(g["year"]) if g.get("year") else (_near_year(month, day, said) if said else None)
        if not 1 <= day <= 31:
            return None
        return f"{day} {MONTH_NAMES[month - 1]}" + (f" {year}" if year else "")
    if kind in ("habit", "life_period"):  # as written
        return " ".join(m.group().split())
    if said is None:
        return None if kind not in ("year", "month_year", "season") else _resolve_absolute(kind, g)
    if kind == "relative_day":
        word = g["word"].lower()
        shift = {"day before yesterday": -2, "yesterday": -1, "last night": -1, "tomorrow": 1, "tmrw": 1, "tmr": 1}.get(
            word, 0
        )
        return fmt_day(said + timedelta(days=shift))
    if kind in ("ago", "in_count"):
        n, unit = _count(g["count"]), g["unit"].lower()
        sign = -1 if kind == "ago" else 1
        if unit == "day":
            return fmt_day(said + timedelta(days=sign * n))
        if unit == "month":  # "a month ago" said in January: December
            month = (said.month - 1 + sign * n) % 12
            return f"{MONTH_NAMES[month]} {said.year + (said.month - 1 + sign * n) // 12}"
        # "2 weeks ago", "in a year": as said, from the day it was said (a speaker counting weeks
        # or years rounds; a date would claim more than the message says)
        return f"{g['count'].lower()} {unit}{'s' if n != 1 else ''} {'before' if sign < 0 else 'after'} {fmt_day(said)}"
    if kind in ("vague_ago", "vague_in"):  # no exact date: said as written, from the day it was said
        return (
            f"{' '.join(g['amount'].lower().split())} {g['unit'].lower()} "
            f"{'before' if kind == 'vague_ago' else 'after'} {fmt_day(said)}"
        )
    if kind == "weekday_day":
        return _day_of_month(int(g["day"]), said, sentence, WEEKDAY_NUMBERS[g["weekday"].lower()])
    if kind == "month_day_only":
        return _day_of_month(int(g["day"]), said, sentence)
    if kind == "weekday":
        target = WEEKDAY_NUMBERS[g["weekday"].lower()]
        rel = (g.get("rel") or "").lower()
        ahead = (target - said.weekday()) % 7
        if rel == "next":  # that weekday of next week: said on Monday 3 June, "next Tuesday" is 11 June
            return fmt_day(said + timedelta(days=7 - said.weekday() + target))
        if rel == "coming" or (rel in ("", "on", "this") and _future(sentence)):
            return fmt_day(said + timedelta(days=ahead or 7))
        if rel == "this":
            return fmt_day(said + timedelta(days=ahead))
        return fmt_day(said - timedelta(days=(said.weekday() - target) % 7 or 7))
    if kind == "relative_period":
        rel, period = g["rel"].lower(), g["period"].lower()
        shift = {"last": -1, "next": 1, "this": 0}[rel]
        if period == "year":
            return str(said.year + shift)
        if period == "month":
            index = said.month - 1 + shift
            return f"{MONTH_NAMES[index % 12]} {said.year + index // 12}"
        anchor = said + timedelta(weeks=shift)
        return (
            f"the {period} of {fmt_day(anchor)}"
            if shift == 0
            else (f"the {period} {'before' if shift < 0 else 'after'} {fmt_day(said)}")
        )
    if kind == "holiday":
        name = g["holiday"].lower().replace("'", "")
        month, day = {
            "christmas eve": (12, 24),
            "christmas": (12, 25),
            "new years eve": (12, 31),
            "new years day": (1, 1),
            "new year": (1, 1),
            "valentines day": (2, 14),
            "halloween": (10, 31),
            "thanksgiving": (11, 25),
        }[name]
        return fmt_day(datetime(_near_year(month, day, said), month, day))
    if kind == "month":
        month = MONTH_NUMBERS[g["month"].lower()]
        return f"{MONTH_NAMES[month - 1]} {_near_year(month, 15, said)}"
    if kind == "season":
        season = g["season"].lower()
        year = int(g["year"]) if g.get("year") else _season_year(_SEASON_MONTH[season], sentence, said)
        return f"{season} {year}"
    return _resolve_absolute(kind, g)


def _season_year(first_month: int, sentence: str, said: datetime) -> int:
    """The year of a season named without one: the season it was said in, else the next one when
    the sentence speaks of what is to come ("we plan to go in the summer"), else the last one
    ("my friend was in Santorini in the summer", said in January 2024: summer 2023)."""
    months_in = (said.month - first_month) % 12
    if months_in < 3:  # said during it (winter, from December: the year it began)
        return said.year - (1 if said.month < first_month else 0)
    if _future(sentence):
        return said.year + (1 if first_month <= said.month else 0)
    return said.year - (1 if first_month > said.month else 0)


def _past(sentence: str) -> bool:
    return bool(re.search(r"\b(?:was|were|went|had|did|came|ago|last)\b", sentence, re.I))


def _day_of_month(day: int, said: datetime, sentence: str, weekday: int | None = None) -> str | None:
    """A day of the month said without its month ("Friday the 20th", "on the 20th"): the next such
    day on or after when it was said (the one before when the sentence tells of the past), the first
    of them that falls on the weekday named, else the first of them; None if no month has that day."""
    step = -1 if _past(sentence) else 1
    days = []
    for shift in range(0, 7 * step, step):
        index = said.month - 1 + shift
        try:
            day_of = datetime(said.year + index // 12, index % 12 + 1, day)
        except ValueError:
            continue
        if (day_of.date() - said.date()).days * step >= 0:
            days.append(day_of)
    agreeing = [d for d in days if weekday is None or d.weekday() == weekday]
    return fmt_day((agreeing or days)[0]) if days else None


def _resolve_absolute(kind: str, g: dict) -> str | None:
    if kind == "year":
        return g["year"]
    if kind == "month_year":
        return f"{MONTH_NAMES[MONTH_NUMBERS[g['month'].lower()] - 1]} {g['year']}"
    if kind == "season" and g.get("year"):
        return f"{g['season'].lower()} {g['year']}"
    return None
