"""When the answer step is unsure, the answer is the best message itself, with who wrote it and
when (``Mara, 3 May 2024 14:02: "..."``), not a fragment cut out of it: a reader can judge a
whole message, while a fragment from a message about something else reads as a fact.

Unsure means: verification dropped some of the drafted claims (the evidence answers only part
of the question), or it kept claims none of whose own messages is about what the question
asks (``answer.cites_what_it_is_about`` false for all of them)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from narrative_mirror.agent import countries, exchange_values, exchanges
from narrative_mirror.retrieval.records import ChatMessage

QUOTE_WHEN_UNSURE = True  # the benchmarks switch it off to measure the fragment beside it
# A typed value (a date, an amount, a time, a name, a place, a yes/no verdict) is no fragment: it
# stays, the quote after it shows where it comes from. A phrase cut from a message is replaced.
QUOTE_TYPED_VALUES = True
PHRASES = {"phrase", "llm"}


def is_value(claim) -> bool:
    """A typed value: a slot kind other than a phrase, or a phrase holding a number ("42 each",
    "at 10", "3pm" read from the conversation)."""
    return claim.kind not in PHRASES or bool(re.search(r"\d", claim.text))


LONGEST_QUOTE = 280  # characters of the message shown; a longer one ends with "…"


def when_written(message: ChatMessage) -> str:
    """ "3 May 2024 14:02"; the day alone where the chat gives no time of day; "" without a time."""
    ts = message.timestamp
    if ts is None:
        return ""
    day = f"{ts.day} {ts:%b %Y}"
    return day if (ts.hour, ts.minute, ts.second) == (0, 0, 0) else f"{day} {ts:%H:%M}"


def quote(message: ChatMessage) -> str:
    """The message as a reader is shown it: author, time, its words in quotes, marked when edited."""
    text = " ".join(message.text.split())
    if len(text) > LONGEST_QUOTE:
        text = text[: LONGEST_QUOTE - 1].rstrip() + "…"
    said = ", ".join(p for p in (message.speaker, when_written(message)) if p)
    edited = " (edited)" if getattr(message, "edited", False) else ""
    return f'{said}: "{text}"{edited}'


def unsure(drafted: int, kept: int, about: Sequence[bool]) -> bool:
    """Whether the answer should quote instead of assert: ``drafted`` claims, ``kept`` of them
    verified, ``about``: per kept claim, whether its own messages are about the question
    (``answer.cites_what_it_is_about``)."""
    return kept > 0 and (kept < drafted or not any(about))


def edited_source(claims: Sequence, evidence: Mapping[str, object]) -> str | None:
    """The author of the first message the first claim cites when they edited it (the answer
    says so: what counts is the edited text, and a reader may remember the first one); else None."""
    held = [evidence[i].message for i in claims[0].ids if i in evidence]
    return held[0].speaker if held and held[0].edited else None


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def best_quoted(kept: Sequence, evidence: Mapping[str, object], values: bool = True) -> str | None:
    """The quote of the first message a kept claim cites (best first), None when none is held (or
    the claim is a typed value and those are not quoted); a typed value stays before its quote
    ("No. Nora, ...: ..."): the quote shows why, the value is not a fragment of it. ``values``
    False: no value before the quote (one of another kind than the question asks for)."""
    for claim in kept:
        for i in claim.ids:
            if i in evidence:
                if not values or not is_value(claim) or _words(claim.text) == _words(evidence[i].message.text):
                    return quote(evidence[i].message)  # a fragment, or a value that is the whole message
                return f"{claim.text}. {quote(evidence[i].message)}" if QUOTE_TYPED_VALUES else None
    return None


# Questions asking for one typed value, by their first words.
_ASKS_FOR = (
    ("who", re.compile(r"^\W*(?:who|whose)\b", re.I)),
    ("how_much", re.compile(r"^\W*how much\b(?!\s+(?:time|longer|later|earlier|further|of)\b)", re.I)),
)
_STREET = re.compile(r"\b(?:rd|road|st|street|lane|ave|avenue|close|way|drive|square)\.?$", re.I)


def answers_another_kind(claims: Sequence, question: str, chat) -> bool:
    """Whether the claims hold no value of the kind the question asks for, so the answer quotes its
    best message instead: who -> a person of the chat, or a name that is no street and no place of
    the gazetteer ("Tucson" answers no who-question); how much -> an amount ("12 teams" is a count).
    The gazetteer is read once per process (about 2 s here), when a who-answer names no one of the chat."""
    asked = next((kind for kind, asks in _ASKS_FOR if asks.search(question)), None)
    if not claims or asked is None:
        return False
    if asked == "how_much":
        return not any(exchange_values.amounts(c.text) for c in claims)
    people = exchanges.people_words(chat)

    def a_person(text: str) -> bool:
        if {w.lower() for w in re.findall(r"[\w'’.-]+", text)} & people:
            return True
        return not (_STREET.search(text.strip()) or countries.countries_in(text.strip()))

    return not any(a_person(c.text) for c in claims)
