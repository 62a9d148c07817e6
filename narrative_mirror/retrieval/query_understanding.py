"""Rule-based reading of a question (no LLM): who it is about, when, and what kind of answer
(``parse_query``), and the messages that match its time (``time_mask``).

- Persons and entities: the chat's speakers and known entities the question names (query_names.py).
- Time: dates, months, weeks, holidays, years and weekdays as time windows (query_time.py).
- Question type: when / where / who / why / how_many / how / what / yes_no / other.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta

import numpy as np

from narrative_mirror.retrieval.query_names import EntityMatcher, entities, persons
from narrative_mirror.retrieval.query_time import TimeWindow, time_windows, weekdays

_QUESTION_TYPES = [
    ("how_many", re.compile(r"\bhow\s+(many|much|often|long)\b", re.I)),
    ("when", re.compile(r"\b(when|what\s+(date|day|time|year|month))\b", re.I)),
    ("where", re.compile(r"\b(where|which\s+(city|country|place|state|restaurant))\b", re.I)),
    ("who", re.compile(r"\b(who|whom|whose)\b", re.I)),
    ("why", re.compile(r"\bwhy\b", re.I)),
    ("how", re.compile(r"\bhow\b", re.I)),
    ("what", re.compile(r"\b(what|which)\b", re.I)),
]
_YES_NO = re.compile(
    r"^\s*(is|are|was|were|do|does|did|has|have|had|can|could|will|would|should|shall|may|might)\b", re.I
)


@dataclass
class QueryInfo:
    question_type: str
    persons: list[str] = field(default_factory=list)  # canonical speaker names
    entities: list[str] = field(default_factory=list)
    windows: list[TimeWindow] = field(default_factory=list)  # a message matches ANY of them
    weekdays: list[int] = field(default_factory=list)  # 0 = Monday

    @property
    def has_time(self) -> bool:
        return bool(self.windows or self.weekdays)

    def to_dict(self) -> dict:
        """JSON-friendly form (datetimes as ISO strings) for traces."""
        out = asdict(self)
        out["windows"] = [
            {
                "start": w.start.isoformat() if w.start else None,
                "end": w.end.isoformat() if w.end else None,
                "expression": w.expression,
            }
            for w in self.windows
        ]
        return out


def question_type(query: str) -> str:
    """A question opening with an auxiliary ("Did ...", "Is ...") is yes/no; otherwise the
    type of its first question word ("how many" before "how", "what date" before "what")."""
    if _YES_NO.match(query):
        return "yes_no"
    best: tuple[int, int, str] | None = None
    for order, (name, pattern) in enumerate(_QUESTION_TYPES):
        m = pattern.search(query)
        if m and (best is None or (m.start(), order) < best[:2]):
            best = (m.start(), order, name)
    return best[2] if best else "other"


def parse_query(
    query: str,
    *,
    speakers: Sequence[str] = (),
    aliases: dict[str, str] | None = None,
    known_entities: Iterable[str] = (),
    chat_start: datetime | None = None,
    chat_end: datetime | None = None,
    entity_matcher: EntityMatcher | None = None,
) -> QueryInfo:
    """Everything this module reads from one question, against one chat's vocabulary and span.

    ``entity_matcher``: the chat's ``EntityMatcher(known_entities, exclude=speakers + aliases)``,
    built once per chat (then ``known_entities`` is not read).
    """
    if not isinstance(query, str) or not query.strip():
        raise ValueError("query: empty question")
    names = [*speakers, *(aliases or {})]
    return QueryInfo(
        question_type=question_type(query),
        persons=persons(query, speakers, aliases),
        entities=(
            entity_matcher.find(query) if entity_matcher is not None else entities(query, known_entities, exclude=names)
        ),
        windows=time_windows(query, chat_start, chat_end),
        weekdays=weekdays(query),
    )


def time_mask(timestamps: np.ndarray, info: QueryInfo, slack: timedelta = timedelta(0)) -> np.ndarray:
    """Boolean mask of messages matching the question's time: inside any window widened by
    ``slack`` on both sides (people write about a day the day after) and, if weekdays are
    named, sent on one of them. All True when the question names no time."""
    ts = np.asarray(timestamps, dtype="datetime64[us]")
    mask = np.ones(ts.shape[0], dtype=bool)
    if info.windows:
        in_any = np.zeros(ts.shape[0], dtype=bool)
        for w in info.windows:
            inside = np.ones(ts.shape[0], dtype=bool)
            if w.start is not None:
                inside &= ts >= np.datetime64(w.start - slack, "us")
            if w.end is not None:
                inside &= ts < np.datetime64(w.end + slack, "us")
            in_any |= inside
        mask &= in_any
    if info.weekdays:
        days = (ts.astype("datetime64[D]").astype(np.int64) + 3) % 7  # 1970-01-01 was a Thursday
        mask &= np.isin(days, info.weekdays)
    return mask
