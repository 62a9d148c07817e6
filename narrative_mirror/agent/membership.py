"""Membership questions answered from a group's system lines.

System lines (joins, leaves, "X added Y", "X removed Y", group creation and renames) stay in the
stored messages layer and out of the index, so no search ever ranks them as evidence for an
ordinary question. A question about membership itself ("When did Ben join the group?", "Who
added Cy?", "When did Dee leave?", "Who created the group?") is answered here, from those lines,
with the line as its evidence; ``answer`` returns None for every other question (and when the
chat's lines do not tell), and the agent goes on as usual.

Lines are read as the readers write them, in English: WhatsApp's own text ("Ann added Cy", "Cy
left", "Ann created group "Trip"", "Dee joined using this group's invite link") and Telegram's
service messages as Telegram shows them ("Ann added Dee, Eve", "Eve left the group", "Ann
created the group «Trip»"), Slack's ("@Ann has joined the channel", "@Ann has left the channel") and
Discord's as its reader writes them ("Ann joined the server.").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from narrative_mirror import storage
from narrative_mirror.agent.contract import AgentAnswer, DebugTrace, EvidenceItem, RankedId
from narrative_mirror.agent.planner import facets_offline
from narrative_mirror.home import Home

Kind = str  # "join", "leave", "create"


@dataclass(frozen=True)
class Event:
    kind: Kind
    people: tuple[str, ...]  # who joined or left ("" for a creation)
    actor: str  # who added, removed or created ("" when the line names nobody)
    line: dict  # the stored row


@dataclass(frozen=True)
class Ask:
    kind: Kind
    person: str  # whom the question is about ("" for the group's creation)
    wants: str  # "when" or "who"


_NAME = r"(?P<who>[\w][\w .'’-]*?)"
_WHEN, _WHO = r"^\W*when\s+", r"^\W*who\s+"
_GROUP = r"(?:the|this)\s+(?:group|chat)"
_QUESTIONS = [
    (re.compile(pattern, re.I), kind, wants)
    for pattern, kind, wants in (
        (rf"{_WHEN}(?:did|has)\s+{_NAME}\s+(?:join|come\s+in(?:to)?|enter|get\s+added)\b", "join", "when"),
        (rf"{_WHEN}was\s+{_NAME}\s+added\b", "join", "when"),
        (rf"{_WHO}(?:added|invited|brought\s+in)\s+{_NAME}(?:\s+to\b.*)?\W*$", "join", "who"),
        (rf"{_WHEN}(?:did|has)\s+{_NAME}\s+(?:leave|quit|exit)\b", "leave", "when"),
        (rf"{_WHEN}was\s+{_NAME}\s+(?:removed|kicked\s+out)\b", "leave", "when"),
        (rf"{_WHO}(?:removed|kicked\s+out)\s+{_NAME}(?:\s+from\b.*)?\W*$", "leave", "who"),
        (rf"{_WHO}(?:created|made|started|set\s+up)\s+{_GROUP}\b", "create", "who"),
        (rf"{_WHEN}was\s+{_GROUP}\s+(?:created|made|started|set\s+up)\b", "create", "when"),
    )
]

_PLACE = r"(?: the (?:group|channel|server))?"  # WhatsApp/Telegram, Slack (``@Ann has joined``), Discord
_LINES = [
    (re.compile(r"^(?P<actor>.+?) added (?P<people>.+)$"), "join"),
    (re.compile(r"^(?P<actor>.+?) removed (?P<people>.+)$"), "leave"),
    (
        re.compile(
            rf"^@?(?P<people>.+?) (?:has )?joined{_PLACE}(?: using this group's invite link| via .+| \(.+\))?\.?$"
        ),
        "join",
    ),
    (re.compile(rf"^@?(?P<people>.+?) (?:has )?left{_PLACE}\.?$"), "leave"),
    (re.compile(r"^(?P<actor>.+?) created (?:the )?group\b.*$"), "create"),
]


def parse_question(question: str) -> Ask | None:
    """The membership question asked, or None for any other question."""
    for pattern, kind, wants in _QUESTIONS:
        if match := pattern.search(question.strip()):
            person = match.groupdict().get("who") or ""
            person = re.sub(r"^(?:the|this)\s+group\b.*", "", person.strip(), flags=re.I)
            return Ask(kind, person, wants)
    return None


def _names(text: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in re.split(r",\s*|\s+and\s+", text.strip().strip(".")) if n.strip())


def read_event(row: dict) -> Event | None:
    """The membership event a system line states, if any."""
    text = (row.get("text") or "").strip()
    for pattern, kind in _LINES:
        if match := pattern.match(text):
            found = match.groupdict()
            return Event(kind, _names(found["people"]) if found.get("people") else (), found.get("actor") or "", row)
    return None


def system_lines(home: Home | None, chat_file: str) -> pl.DataFrame | None:
    """The chat's system lines from the messages layer stored in ``home`` (None without a home or
    without a readable layer)."""
    if home is None:
        return None
    path = storage.frame_path(home.storage, "messages", chat_file)
    if storage.frame_problem(path) is not None:
        return None
    frame = storage.read_frame(path)
    if "system" not in frame.columns:
        return None
    return frame.filter(pl.col("system").fill_null(False)).sort("position")


def _same(name: str, person: str) -> bool:
    """The same person: the whole name, or its first word ("Ben" for "Ben Okafor")."""
    return name.casefold() == person.casefold() or name.casefold().split()[:1] == person.casefold().split()[:1]


def _matching(ask: Ask, events: list[Event]) -> Event | None:
    """The line that answers: the first join or creation, the last leave (people come back)."""
    wanted = [
        e
        for e in events
        if e.kind == ask.kind and (ask.kind == "create" or any(_same(p, ask.person) for p in e.people))
    ]
    return (wanted[-1] if ask.kind == "leave" else wanted[0]) if wanted else None


def answer(home: Home | None, chat_file: str, question: str, profile: str) -> AgentAnswer | None:
    """The membership question answered from the chat's system lines stored in ``home``, or None
    (not one, no home, or the lines do not tell)."""
    ask = parse_question(question)
    if ask is None:
        return None
    lines = system_lines(home, chat_file)
    if lines is None or lines.height == 0:
        return None
    events = [e for row in lines.iter_rows(named=True) if (e := read_event(row)) is not None]
    event = _matching(ask, events)
    if event is None or (ask.wants == "who" and not event.actor):
        return None
    row = event.line
    when = row["timestamp"]
    if ask.wants == "who":
        text = event.actor
    else:
        text = f"{when:%-d %B %Y}" if when is not None else "the chat does not say when"
    # A system line is shown as the line itself: its author (a group title, an actor) is in its words.
    item = EvidenceItem(
        id=row["local_id"], text=row["text"], point="system line", speaker=event.actor or None, timestamp=when
    )
    return AgentAnswer(
        Answer=text,
        Evidence=[item],
        Unknowns=[],
        question=question,
        chat_file=chat_file,
        route="direct",
        profile=profile,
        facets=facets_offline(question),
        rounds=0,
        calls=1,
        llm_calls=0,
        fetches=1,
        stop_reason="coverage_met",
        verifier="membership: read from the chat's system lines",
        trace=DebugTrace(
            final=[RankedId(id=row["local_id"], score=1.0)],
            steps=[
                f"membership: {ask.kind} ({ask.wants}) of {ask.person or 'the group'} "
                f"from system line {row['local_id']}"
            ],
        ),
    )
