"""Rule-based reading of a question (no LLM): who it is about, when, and what kind of answer.

- Persons: the chat's speakers named in the question, by name or by an alias the chat itself
  reveals (``speaker_aliases``: RealTalk speakers go by another first name inside the chat,
  e.g. speaker "Emi" introduces herself as "Kate", and the questions say "Kate").
- Entities: the chat's known entities (L1.5 signals, lower-case) named in the question.
- Time: dates ("29 Dec 2023", "December 30, 2023", "30.12.2023", "2023-12-30"), months
  ("in January", "January 2024"), weeks of a month ("first week of January"), holidays
  ("New Year", "Christmas", "Valentine's Day", "Halloween"), years ("in 2023"), each optionally
  after "before"/"after"/"since"/"until"; and weekdays ("on Monday"). A month or day without a
  year takes the year(s) in which it falls inside the chat's time span (chats are historical:
  "now" means nothing). Windows are half-open [start, end); None = unbounded.
- Question type: when / where / who / why / how_many / how / what / yes_no / other.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta

import numpy as np

MONTHS = {
    name: i + 1
    for i, names in enumerate(
        [("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
         ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
         ("october", "oct"), ("november", "nov"), ("december", "dec")]
    )
    for name in names
}
WEEKDAYS = {d: i for i, d in enumerate(
    ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"])}

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
    ("week", re.compile(_PREFIX + r"\b(?P<ord>first|1st|second|2nd|third|3rd|fourth|4th|last)\s+week\s+of\s+"
                        + _MONTH + r"(?:,?\s+" + _YEAR + r")?\b")),
    ("holiday", re.compile(_PREFIX + r"\b(?P<holiday>" + "|".join(p for p, *_ in _HOLIDAYS) + r")(?:\s+"
                           + _YEAR + r")?\b", re.I)),
    ("month", re.compile(_PREFIX + r"\b(?:(?P<ctx>in|of|during|early|mid|late)\s+)?" + _MONTH
                         + r"(?:,?\s+" + _YEAR + r")?\b")),
    ("year", re.compile(_PREFIX + r"\b(?:in|of|during)?\s*" + _YEAR + r"\b", re.I)),
]
_WEEKDAY = re.compile(r"\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b", re.I)

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
    r"^\s*(is|are|was|were|do|does|did|has|have|had|can|could|will|would|should|shall|may|might)\b", re.I)


@dataclass(frozen=True)
class TimeWindow:
    start: datetime | None  # inclusive; None = open
    end: datetime | None  # exclusive; None = open
    expression: str  # the text it was read from


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
            {"start": w.start.isoformat() if w.start else None, "end": w.end.isoformat() if w.end else None,
             "expression": w.expression}
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


def _years(month: int, chat_start: datetime | None, chat_end: datetime | None) -> list[int]:
    """Years whose ``month`` overlaps the chat span, else the last such year before its end."""
    if chat_start is None or chat_end is None:
        return []
    years = [y for y in range(chat_start.year, chat_end.year + 1)
             if datetime(y, month, 1) <= chat_end and _month_end(y, month) > chat_start]
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
        return [(datetime(y, month, 1), _month_end(y, month))
                for y in ([year] if year else _years(month, chat_start, chat_end))]
    if kind == "year":
        return [(datetime(year, 1, 1), datetime(year + 1, 1, 1))]
    raise ValueError(kind)


def time_windows(query: str, chat_start: datetime | None = None, chat_end: datetime | None = None) -> list[TimeWindow]:
    """Time windows named in ``query`` (see the module doc), in order of appearance."""
    taken = [False] * len(query)
    found: list[tuple[int, TimeWindow]] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(query):
            if any(taken[m.start():m.end()]):
                continue
            spans = _windows_for(kind, m, chat_start, chat_end)
            if not spans:
                continue
            taken[m.start():m.end()] = [True] * (m.end() - m.start())
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


_BEFORE_NAME = r"(?<![\w-])"  # a name starts a word ...
_AFTER_NAME = r"(?:'s|’s)?(?![\w-])"  # ... and ends one, optionally with a possessive
_NAME_END = re.compile(_AFTER_NAME, re.I)


@functools.lru_cache(maxsize=4096)
def _word_pattern(name: str) -> re.Pattern:
    """``name`` as a whole word (case-insensitive, optional possessive); compiled once per name."""
    return re.compile(_BEFORE_NAME + re.escape(name) + _AFTER_NAME, re.I)


def _one_edit_apart(a: str, b: str) -> bool:
    """Equal up to one substitution, insertion, deletion or swap of neighbouring letters."""
    if a == b:
        return True
    if abs(len(a) - len(b)) > 1:
        return False
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    return (a[i + 1:] == b[i + 1:] or a[i:] == b[i + 1:] or a[i + 1:] == b[i:]
            or (a[i:i + 2] == b[i:i + 2][::-1] and a[i + 2:] == b[i + 2:]))


# Shorter names are too close to ordinary words ("Lisa" would catch "Mona Lisa" for "Liza").
MIN_TYPO_NAME = 5


def _names_in(query: str, speakers: Sequence[str], aliases: dict[str, str] | None) -> dict[str, str]:
    """{spelling (lower case): speaker} for the chat's names and aliases, plus the capitalized
    words of ``query`` that misspell one of them by one edit ("Nikolas" for "Nicolas")."""
    names = {s.lower(): s for s in speakers}
    names.update({a.lower(): s for a, s in (aliases or {}).items()})
    for word in {w.lower() for w in re.findall(r"\b[A-Z][a-z]+\b", query)} - names.keys():
        close = {s for n, s in names.items()
                 if len(n) >= MIN_TYPO_NAME and len(word) >= MIN_TYPO_NAME and _one_edit_apart(word, n)}
        if len(close) == 1:
            names[word] = close.pop()
    return names


def persons(query: str, speakers: Sequence[str], aliases: dict[str, str] | None = None) -> list[str]:
    """Speakers the question names (canonical names, in order of first mention), by name, alias
    or a one-letter misspelling of either."""
    hits = []
    for name, speaker in _names_in(query, speakers, aliases).items():
        m = _word_pattern(name).search(query)
        if m:
            hits.append((m.start(), speaker))
    return list(dict.fromkeys(s for _, s in sorted(hits)))


def without_persons(query: str, speakers: Sequence[str], aliases: dict[str, str] | None = None) -> str:
    """The question with every speaker name and alias (misspelled or not, and its possessive)
    removed.

    Used as the content query: a speaker's name would otherwise match the ``speaker:`` prefix
    of all their messages and favour their shortest ones ("Is Elise vegan?" -> "Is vegan?").
    """
    for name in sorted(_names_in(query, speakers, aliases), key=len, reverse=True):
        query = _word_pattern(name).sub(" ", query)
    return re.sub(r"\s+", " ", query).strip()


def _may_share_a_start(shorter: str, longer: str) -> bool:
    """Could ``shorter`` and the start of ``longer`` both match (case-insensitively, as ``re.I``
    compares) one stretch of text? Distinct ASCII characters never do, except as upper/lower case
    of one letter; any other character might be a case variant of anything ("K", the Kelvin sign,
    matches "k"), so it is taken as a possible match."""
    return all(a == b or not (a.isascii() and b.isascii()) or a.lower() == b.lower()
               for a, b in zip(shorter, longer))


def _trie_pattern(names: Sequence[str]) -> str:
    """One regex alternation of ``names`` factored by common prefixes (a trie): the regex engine
    tries the alternatives of one node by their first character, so a position that starts no
    name fails in a few comparisons instead of one per name. Each name ends in an empty group,
    numbered 1.. in ``sorted(names)`` order; no name may be a prefix of another."""
    trie: dict = {}
    for name in names:
        node = trie
        for char in name:
            node = node.setdefault(char, {})
        node[None] = name

    def emit(node: dict) -> str:
        if None in node:  # a leaf: no name continues a name of the same layer
            return "()"
        branches = [re.escape(char) + emit(node[char]) for char in sorted(node)]
        return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"

    return emit(trie)


class EntityMatcher:
    """Finds a chat's known entities in questions: the result of ``entities`` (below), from a
    few regexes compiled once per chat instead of one regex per entity per question.

    The entities are split into layers in which no entity can match where another one of its
    layer matches (none is a possible prefix of another, ``_may_share_a_start``); each layer is
    one trie-shaped alternation inside a lookahead, so ``finditer`` reports, at every position,
    the one entity of the layer that matches there as a whole word (``_word_pattern``). From all
    (position, entity) pairs the per-entity greedy choice of ``entities`` is replayed exactly.
    """

    def __init__(self, known: Iterable[str], exclude: Iterable[str] = ()):
        skip = {e.lower() for e in exclude}
        self.names = sorted({e.lower() for e in known if e and len(e) > 2} - skip, key=lambda e: (-len(e), e))
        layers: list[list[str]] = []
        ascii_members: list[dict[int, set[str]]] = []  # per layer: length -> its ASCII names
        other_members: list[list[str]] = []  # per layer: names with other characters
        for name in sorted(self.names, key=lambda e: (len(e), e)):  # shorter names first
            for i, layer in enumerate(layers):
                if name.isascii():
                    clash = (any(name[:n] in names for n, names in ascii_members[i].items())
                             or any(_may_share_a_start(m, name) for m in other_members[i]))
                else:
                    clash = any(_may_share_a_start(m, name) for m in layer)
                if not clash:
                    break
            else:
                i = len(layers)
                layers.append([])
                ascii_members.append({})
                other_members.append([])
            layers[i].append(name)
            if name.isascii():
                ascii_members[i].setdefault(len(name), set()).add(name)
            else:
                other_members[i].append(name)
        self._layers = [
            (re.compile(_BEFORE_NAME + "(?=" + _trie_pattern(layer) + _AFTER_NAME + ")", re.I), sorted(layer))
            for layer in layers
        ]

    def __len__(self) -> int:
        return len(self.names)

    def occurrences(self, query: str) -> dict[str, list[int]]:
        """{entity: the positions where it matches as a whole word, ascending}."""
        found: dict[str, list[int]] = {}
        for pattern, names in self._layers:
            for m in pattern.finditer(query):
                found.setdefault(names[m.lastindex - 1], []).append(m.start())
        return found

    def find(self, query: str) -> list[str]:
        """Known entities (lower-case) named in the question, longest first, no overlaps: each
        entity, longest first, takes its first whole-word match (in ``finditer`` order) that no
        longer entity has taken."""
        found = self.occurrences(query)
        taken = [False] * len(query)
        out = []
        for entity in sorted(found, key=lambda e: (-len(e), e)):
            free_from = 0  # finditer resumes after a match: no overlapping matches of one entity
            for start in found[entity]:
                if start < free_from:
                    continue
                end = _NAME_END.match(query, start + len(entity)).end()
                free_from = end
                if not any(taken[start:end]):
                    taken[start:end] = [True] * (end - start)
                    out.append(entity)
                    break
        return out


@functools.lru_cache(maxsize=16)
def _matcher(known: frozenset[str], exclude: frozenset[str]) -> EntityMatcher:
    return EntityMatcher(known, exclude)


def entities(query: str, known: Iterable[str], exclude: Iterable[str] = ()) -> list[str]:
    """Known entities (lower-case) named in the question, longest first, no overlaps.

    Each entity, longest first (then alphabetically), takes its first whole-word occurrence
    (``_word_pattern``) that overlaps no occurrence taken before. A chat's matcher is built once
    (``EntityMatcher``; the last 16 vocabularies are kept).
    """
    return _matcher(frozenset(known), frozenset(exclude)).find(query)


_INTRODUCTION = r"(?i:i'm|i’m|i am|my name is|my name's|call me|this is)"
_SELF_INTRO = re.compile(r"\b" + _INTRODUCTION + r"\s+([A-Z][a-z]+)\b(?=\s*(?:[.!,?]|$))")
_VOCATIVE = [
    re.compile(r"^([A-Z][a-z]+)\s*[!?,.]"),  # "Kate! How ..."
    re.compile(r",\s*([A-Z][a-z]+)\s*[!?.]*\s*$"),  # "... thank you, Kate!"
    re.compile(r"\b(?:[Hh]i|[Hh]ey|[Hh]ello|[Tt]hanks|[Tt]hank you|[Bb]ye|[Nn]ight|[Mm]orning)\s*,?\s+([A-Z][a-z]+)\b"),
]

# Capitalized sentence openers that look like vocatives ("Oh!", "Hello, ...").
_NOT_NAMES = frozenset(
    """oh ah aw aww ahh hmm hm wow yay yes yeah yep yup no nope ok okay sure well so plus also
    hello hi hey thanks thank sorry congrats congratulations haha lol omg great nice cool good
    awesome amazing perfect true exactly totally definitely absolutely honestly anyway btw
    morning night bye cheers welcome please wait really right""".split()
)


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"  # what re's \w (and so \b) means in str patterns


def _lower_case_in(word: str, joined: str) -> bool:
    """Whether lower-case ``word`` (letters a-z) is written as a whole word in ``joined`` (texts
    joined by newlines, no word characters): ``word in set(re.findall(r"\\b[a-z]+\\b", joined))``,
    found by substring search instead of listing every word of a chat."""
    at = joined.find(word)
    while at >= 0:
        end = at + len(word)
        if (at == 0 or not _is_word_char(joined[at - 1])) and (end == len(joined) or not _is_word_char(joined[end])):
            return True
        at = joined.find(word, at + 1)
    return False


_INTRODUCTION_PHRASES = ("i'm", "i’m", "i am", "my name is", "my name's", "call me", "this is")
# The non-ASCII letters re.I matches to the phrases' letters (İ, ı ~ i; ſ ~ s; the Kelvin sign ~ k).
_INTRODUCTION_FOLD = (("\u0130", "i"), ("\u0131", "i"), ("\u017f", "s"), ("\u212a", "k"))


def _introducing(texts: Sequence[str]) -> set[int]:
    """Indices of the texts holding an introduction phrase in any case ("I'm", "MY NAME IS",
    ...): only they can match ``_SELF_INTRO``. Plain substring searches over all texts joined by
    newlines, folded to lower case (no phrase holds a newline, so each hit lies in one text)."""
    joined = "\n".join(texts)
    for letter, ascii_letter in _INTRODUCTION_FOLD:
        joined = joined.replace(letter, ascii_letter)
    joined = joined.lower()
    if len(joined) != sum(map(len, texts)) + max(len(texts) - 1, 0):  # lower() changed lengths
        return set(range(len(texts)))
    hits = []
    for phrase in _INTRODUCTION_PHRASES:
        at = joined.find(phrase)
        while at >= 0:
            hits.append(at)
            at = joined.find(phrase, at + 1)
    starts = np.cumsum([0] + [len(t) + 1 for t in texts])
    return {int(i) for i in np.searchsorted(starts, hits, side="right") - 1} if hits else set()


def speaker_aliases(messages: Sequence[tuple[str, str]], min_votes: int = 2) -> dict[str, str]:
    """Other first names the speakers go by, from (speaker, text) messages: {alias: speaker}.

    Evidence for "X is speaker S": S writes "I'm X." / "my name is X", or (two-person chats)
    the other speaker addresses X ("Kate!", "thanks, Kate", "hi Kate"). X must be capitalized,
    never written in lower case anywhere in the chat (so "Wow!" or "Good!" do not count), not a
    speaker's name, and have ``min_votes`` votes, at least twice as many as for anyone else.
    """
    speakers = list(dict.fromkeys(s for s, _ in messages))
    texts = [t for _, t in messages]
    joined = "\n".join(texts)
    introducing = _introducing(texts)
    votes: dict[str, Counter] = {}
    for i, (speaker, text) in enumerate(messages):
        if i in introducing:
            for name in _SELF_INTRO.findall(text):
                votes.setdefault(name, Counter())[speaker] += 1
        if len(speakers) == 2:
            other = speakers[1] if speaker == speakers[0] else speakers[0]
            for pattern in _VOCATIVE:
                for name in pattern.findall(text):
                    votes.setdefault(name, Counter())[other] += 1
    known = {s.lower() for s in speakers}
    aliases = {}
    for name, counter in votes.items():
        lower = name.lower()
        if lower in known or lower in _NOT_NAMES or lower in MONTHS or lower in WEEKDAYS or _lower_case_in(lower, joined):
            continue
        (best, n), *rest = counter.most_common() + [(None, 0)]
        runner_up = rest[0][1] if rest else 0
        if n >= min_votes and n >= 2 * runner_up:
            aliases[name] = best
    return aliases


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
        entities=(entity_matcher.find(query) if entity_matcher is not None
                  else entities(query, known_entities, exclude=names)),
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
