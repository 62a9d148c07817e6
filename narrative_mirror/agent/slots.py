"""Offline answers that answer: the span of the evidence that fills the question's slot.

A "when" question is answered with a date (dates.py: a relative one resolved against the time the
message was written: "next Tuesday" said on Fri 7 June 2024 is 11 June 2024), a "where" question with a
place, "who" with a name, "how many / how long" with a count and its unit, a yes/no question with
yes or no, anything else with the words of the best evidence sentence that the question does not
already contain. ``required_slot_filled`` tells whether an answer has the kind of content its
question needs; the offline verifier uses it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from narrative_mirror.agent import slot_nouns, slot_phrases
from narrative_mirror.agent.config import module_settings, setting
from narrative_mirror.agent.dates import MONTH_NAMES, WEEKDAY_NUMBERS, fmt_day, resolve_date
from narrative_mirror.agent.exchange_values import PLAN, RULED_OUT
from narrative_mirror.agent.text import stem
from narrative_mirror.layers.text import STOPWORDS, straight_apostrophes, tokens
from narrative_mirror.retrieval.records import ChatMessage

# [answer] span_words: an open answer ("what", "why") keeps at most this many words. asking_penalty:
# a sentence that is itself a question rarely answers one, this many shared words less.
__getattr__ = module_settings(
    __name__,
    {
        "SPAN_WORDS": lambda: setting("answer", "span_words"),
        "ASKING_PENALTY": lambda: setting("answer", "asking_penalty"),
    },
)

_PLACE_CUE = re.compile(
    r"\b(?:in|at|to|from|near|around|visit(?:ed|ing)?|moved to|live in|lives in|trip to)\s+"
    r"(?P<place>(?:the\s+)?[A-Z][\w'’.&-]*(?:\s+(?:of\s+)?[A-Z][\w'’.&-]*)*)"
)
# "Where is the cottage?", "Where are the spare keys?": the thing asked about, by its last word
_WHERE_IS = re.compile(
    r"\W*where\s+(?:is|are|was|were)\s+(?:(?:the|a|an|my|our|your|his|her|their)\s+)?(?:[\w'’-]+\s+)?"
    r"(?P<noun>[a-z][\w-]*)\s*\??\s*$",
    re.I,
)
_ADDRESS = re.compile(
    r"\b\d{1,4}[a-z]?\s+(?:[A-Z][\w'’-]*\s+){1,3}(?:Road|Rd|Street|St|Lane|Ln|Avenue|Ave|Close|Drive|Way|"
    r"Place|Square|Crescent|Terrace|Gardens|Grove|Hill|Row|Mews|Court)\b"
)
# A place written in lower case ("along the river path near the old mill"): the fallback of a
# "where" question when no message names a place.
_LOCATIVE = re.compile(
    r"\b(?:at|in|into|to|near|along|by|on|from|around|inside|outside|behind|across)\s+"
    r"(?:the|a|an|my|our|his|her|their|your)\s+(?P<noun>[a-z][\w'’-]*)(?:\s+[a-z][\w'’-]*){0,5}",
    re.I,
)
# "in a year", "by a mile", "on the way": a time, a measure or a manner, not a place
_NOT_PLACE_NOUNS = {
    "year",
    "years",
    "week",
    "weeks",
    "day",
    "days",
    "month",
    "months",
    "while",
    "moment",
    "minute",
    "minutes",
    "hour",
    "hours",
    "second",
    "seconds",
    "time",
    "row",
    "mile",
    "miles",
    "bit",
    "lot",
    "way",
    "end",
    "start",
    "beginning",
    "middle",
    "meantime",
    "mood",
    "hurry",
    "rush",
    "couple",
    "few",
    "morning",
    "afternoon",
    "evening",
    "night",
    "weekend",
    "side",
    "top",
    "phone",
}
_LOCATIVE_END = re.compile(
    r"\s+(?:with|and|but|because|when|so|for|after|before|since|while|if|yesterday|today|"
    r"tomorrow|tonight|this|last|next|every|then|until)\b.*",
    re.I,
)
_CAPITALIZED_RUN = re.compile(r"\b[A-Z][\w'’.&-]*(?:\s+(?:of\s+|de\s+)?[A-Z][\w'’.&-]*)*")
_COUNT_WORDS = (
    r"one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
    r"sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|"
    r"thousand"
)
_QUANTITY = re.compile(
    rf"\b(?P<count>\d+(?:[.,]\d+)?|{_COUNT_WORDS}|a couple of|a couple|a few|several|a dozen)\s+"
    r"(?P<unit>[a-z][a-z-]*)",
    re.I,
)
_A_COUNT = re.compile(rf"\d|\b(?:{_COUNT_WORDS}|once|twice|thrice|couple|few|several|dozen|many|since|every)\b", re.I)
_UNITS = r"(?:years?|months?|weeks?|days?|hours?|minutes?|decades?|summers?|winters?)"
_MONEY_ASKED = re.compile(
    r"\b(?:cost|costs|price|pay|paid|spend|spent|charge|charged|fee|deposit|owe|owes)\b|\bhow much (?:is|are|was|were)\b",
    re.I,
)
_MONEY_UNIT = re.compile(r"quid|pounds?|euros?|dollars?|bucks|pence|p|grand|k", re.I)
_TIME_UNIT = re.compile(rf"{_UNITS}|mins?|hrs?|secs?|seconds?|nights?", re.I)
_DURATION = re.compile(
    rf"\bfor\s+(?:(?:many|several|a\s+few|a\s+couple\s+of|about|almost|over|like|the\s+past|"
    rf"\d+|{_COUNT_WORDS}|a|an)\s+)*{_UNITS}\b",
    re.I,
)
# "since he left" gives no time: "since" as "because" or before a clause is no answer
_SINCE = re.compile(
    r"\bsince\s+(?:(?:the|my|her|his|our|last|early|late)\s+)?(?!(?:he|she|it|they|i|we|you|then|that|this)\b)"
    r"[\w'-]+(?:\s+(?:school|\d{4}))?",
    re.I,
)
_EVERY = re.compile(rf"\bevery\s+(?:(?:other|single|\d+|{_COUNT_WORDS})\s+)?[a-z]+", re.I)
_ONCE = re.compile(r"\b(?:once|twice|thrice)\b", re.I)
_PAST_QUESTION = re.compile(r"\b(?:did|was|were|had)\b", re.I)
_NEGATION = re.compile(rf"\b(?:no|not|never|nothing|none|nobody|neither|nor|{RULED_OUT})\b|n't\b", re.I)
# A sentence ends at . ! ? but not after a title ("Mr. Okafor", "Dr. Brandt", "St. Columba's").
_SENTENCE = re.compile(r"(?<=[.!?])(?<!\bMr\.)(?<!\bMrs\.)(?<!\bMs\.)(?<!\bDr\.)(?<!\bSt\.)\s+")
_SHORT_MONTHS = [m.lower()[:3] for m in MONTH_NAMES] + ["sept"]
_NOT_PLACES = (
    {m.lower() for m in MONTH_NAMES}
    | set(_SHORT_MONTHS)
    | set(WEEKDAY_NUMBERS)
    | {d[:3] for d in WEEKDAY_NUMBERS}
    | {"i", "i'm", "i've", "i'll", "ok", "okay", "lol", "omg", "haha", "yes", "no"}
)
_CLAIM_KINDS = {"people": "name", "named": "names"}  # how a typed slot's claim is checked (answer._in_evidence)
OPEN_INTENTS = ("what",)  # answered by a phrase of the best sentence


@dataclass(frozen=True)
class SlotAnswer:
    text: str  # the answer as shown: "11 June 2024", "Miami", "2 days", "Yes", "ham and peas"
    local_id: str  # the message it comes from
    sentence: str  # the sentence of that message it was read in
    kind: str  # date | place | name | quantity | yes_no | phrase


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()] or [text.strip()]


def _question_stems(question: str) -> set[str]:
    return {stem(t) for t in tokens(question)}


def _shared_words(question: str, sentence: str) -> int:
    """How many content words (stopwords aside) the sentence shares with the question, by stem
    ("planning" is "plan": a doubled last consonant counts once)."""

    def content(text: str) -> set[str]:
        found = {stem(t) for t in tokens(text) if t not in STOPWORDS}
        return {w[:-1] if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiouls" else w for w in found}

    return len(content(question) & content(sentence))


def phrase_span(sentence: str, question: str) -> str | None:
    """The part of the sentence (as written) from its first to its last word the question lacks,
    cut to the densest ``SPAN_WORDS`` words; None when every word is already in the question."""
    known = _question_stems(question)
    words = list(re.finditer(r"[\w'’-]+", sentence))
    new = [
        i for i, w in enumerate(words) if w.group().lower() not in STOPWORDS and stem(w.group().lower()) not in known
    ]
    if not new:
        return None
    span_words = setting("answer", "span_words")
    best = max(range(len(new)), key=lambda a: sum(1 for b in new[a:] if b - new[a] < span_words))
    start = new[best]
    end = max(i for i in new if i - start < span_words)
    return sentence[words[start].start() : words[end].end()]


def _place(sentence: str, question: str, speakers: set[str]) -> str | None:
    if address := _ADDRESS.search(sentence):  # "New place is 14 Carlton Road": a place whatever precedes it
        return address.group(0)
    known = _question_stems(question) | {s.lower() for s in speakers}
    for match in _PLACE_CUE.finditer(sentence):
        place = re.sub(r"^the\s+", "", match.group("place")).strip(" .")
        words = place.lower().split()
        if words and words[0] not in _NOT_PLACES and not all(stem(w) in known for w in words):
            return place
    return None


# A person's home said as the place: "at mine", "back to ours", "to my flat", "at Sam's" (not "at
# Sam's party", not "similar to mine")
_AT_SOMEONES_HOME = re.compile(
    r"\b(?:(?:at|(?i:back|over|round)\s+to)\s+(?P<own>mine|ours)|(?P<prep>at|to|in)\s+(?:my|our)\s+"
    r"(?P<noun>place|house|flat|home|apartment|garage|shed|loft|attic|cellar|basement|spare room|garden)\b"
    r"|(?:at|to)\s+(?P<name>[A-Z][\w-]*)['’]s\b"
    r"(?!\s+(?!and\b|or\b|then\b|at\b|on\b|for\b|after\b|before\b|instead\b|tonight\b|tomorrow\b)[a-z]))\b"
)


def home_place(sentence: str, author: str) -> str | None:
    """The home a sentence names as a place, as whose it is: "I can host at mine" by Omar is "at
    Omar's place", "at Sam's" is "at Sam's place", "stick them in my garage" by Tom "in Tom's
    garage"; None when it names no home."""
    if not (found := _AT_SOMEONES_HOME.search(straight_apostrophes(sentence))):
        return None
    owner = found.group("name") or author
    return f"{'in' if found.group('prep') == 'in' else 'at'} {owner}'s {found.group('noun') or 'place'}"


def _entity_place(sentence: str, question: str, entities: set[str], speakers: set[str]) -> str | None:
    known = _question_stems(question) | {s.lower() for s in speakers}
    lowered = sentence.lower()
    for entity in sorted(entities, key=len, reverse=True):
        if entity not in known and entity not in _NOT_PLACES and re.search(rf"\b{re.escape(entity)}\b", lowered):
            start = lowered.index(entity)
            found = sentence[start : start + len(entity)]
            return found if found[:1].isupper() else found.title()  # a chat may write "miami"
    return None


def _name(sentence: str, question: str, speakers: set[str]) -> str | None:
    known = _question_stems(question)
    for match in _CAPITALIZED_RUN.finditer(sentence):
        words = match.group().split()
        if words[0].lower() in _NOT_PLACES or words[0].lower() in STOPWORDS or match.start() == 0:
            continue
        if not all(stem(w.lower()) in known for w in words):
            return match.group().strip(" .")
    others = [s for s in speakers if stem(s.lower()) not in known and re.search(rf"\b{re.escape(s)}\b", sentence)]
    return others[0] if others else None


def _quantity(sentence: str, question: str) -> str | None:
    asked = set(tokens(question))
    # "how long": "for many many years", "since September"; "how often": "every 2 weeks", "every year"
    if "long" in asked and (span := _DURATION.search(sentence) or _SINCE.search(sentence)):
        return span.group().strip()
    if "often" in asked and (span := _EVERY.search(sentence)):
        return span.group().strip()
    matches = [
        m
        for m in _QUANTITY.finditer(sentence)
        if m.group("unit").lower() not in STOPWORDS or m.group("unit").lower() in ("times",)
    ]
    if _MONEY_ASKED.search(question) and not re.search(r"\bhow much time\b", question, re.I):
        # "How much did the burgers cost?" is answered by money, not "80 sausages" nor "in 20 mins"
        # ("How much time does he spend on the road?" asks a time)
        matches = [
            m for m in matches if sentence[: m.start()].rstrip()[-1:] in "£$€" or _MONEY_UNIT.fullmatch(m["unit"])
        ]
    found = [(m.group("count"), m.group("unit")) for m in matches]
    once = _ONCE.search(sentence)
    if once and ("times" in asked or "often" in asked):
        return once.group()
    for count, unit in found:  # a count of what the question asks about first
        if stem(unit.lower()) in {stem(w) for w in asked}:
            return f"{count} {unit}"
    if once:
        return once.group()
    return f"{found[0][0]} {found[0][1]}" if found else None


def answer_slot(
    question: str,
    intent: str,
    evidence: Sequence[ChatMessage],
    entities: Iterable[str] = (),
    speakers: Iterable[str] = (),
    look_at: int = 3,
) -> SlotAnswer | None:
    """The answer span for a question of type ``intent`` (planner.question_intent) from the
    ``look_at`` best evidence messages (best first); None when none of them fills the slot."""
    entities, speakers = set(entities), set(speakers)
    if kind := slot_nouns.asked_kind(question, intent):  # a name, colour, role or people: as written
        known = {t.lower() for t in tokens(question)}
        for message in list(evidence)[:look_at]:
            for sentence in sentences(message.text):
                if found := slot_nouns.read(kind, sentence, known, names=entities | speakers):
                    return SlotAnswer(found, message.local_id, sentence, _CLAIM_KINDS.get(kind, "phrase"))
        if kind not in ("people", "named"):  # no colour / role / given name in the evidence: not a fragment instead
            return None
    if intent == "yes_no" and offered_answers(question):  # "full-time or part-time?": neither yes nor no answers it
        return _alternative(question, list(evidence)[:look_at])
    if intent in OPEN_INTENTS and (best := _best_phrase(question, list(evidence)[:look_at])):
        return best
    if intent == "where" and (attached := _place_of_asked_noun(question, list(evidence)[:look_at], speakers)):
        return attached
    for message in list(evidence)[:look_at]:
        for sentence in sorted(sentences(message.text), key=lambda s: -_shared_words(question, s)):
            found = _fill(question, intent, sentence, message, entities, speakers)
            if found:
                return SlotAnswer(found[0], message.local_id, sentence, found[1])
        # a lower-case place in a sentence with the question's words ("Meet at the station at 7:45")
        # answers before a place a later message names in passing ("Train from Newcastle at 07:45?")
        if intent == "where" and (here := _locative(message, question)):
            return here
    if intent == "where":  # a place written in lower case ("along the river"), then a name the chat uses
        for message in list(evidence)[:look_at]:
            if here := _locative(message, question, shared=False):
                return here
        for message in list(evidence)[:look_at]:
            for sentence in sentences(message.text):
                if place := _entity_place(sentence, question, entities, speakers):
                    return SlotAnswer(place, message.local_id, sentence, "place")
    if intent == "when" and evidence and evidence[0].timestamp:  # the best message's own date
        first = evidence[0]
        return SlotAnswer(fmt_day(first.timestamp), first.local_id, sentences(first.text)[0], "date")
    return None


def _where_subject(question: str) -> str | None:
    """The stem of the thing a "where is ..." question asks about ("cottage"), else None."""
    subject = _WHERE_IS.match(question)
    return stem(subject.group("noun").lower()) if subject else None


def _place_of_asked_noun(question: str, evidence: list, speakers: set[str]) -> SlotAnswer | None:
    """A place named right after the thing a "where is ..." question asks about ("Where is the
    cottage?": "I've found a cottage in Robin Hood's Bay"), before a place another message names in
    passing ("pick everyone up from Scarborough ... 30 mins to the cottage")."""
    asked = _where_subject(question)
    if asked is None:
        return None
    for message in evidence:
        for sentence in sentences(message.text):
            for match in _PLACE_CUE.finditer(sentence):
                before = re.findall(r"[A-Za-z]+", sentence[: match.start()])
                if (
                    before
                    and stem(before[-1].lower()) == asked
                    and (place := _place(match.group(0), question, speakers))
                ):
                    return SlotAnswer(place, message.local_id, sentence, "place")
    return None


def _place_phrase(found: re.Match) -> str:
    """The locative as a place: what follows it cut ("... with Ana"), and a dangling preposition
    ("at the station at" 7:45)."""
    return re.sub(r"\s+(?:at|on|in|by|to|from|of)$", "", _LOCATIVE_END.sub("", found.group()), flags=re.I)


def _locative(message: ChatMessage, question: str, shared: bool = True) -> SlotAnswer | None:
    """The first place written in lower case ("at the station") in the message; with ``shared``,
    only in a sentence that shares the question's words. Never the thing a "where is" question
    asks about: "at the old flat" does not say where the new flat is."""
    asked = _where_subject(question)
    for sentence in sentences(message.text):
        if not shared or _shared_words(question, sentence):
            for found in _LOCATIVE.finditer(sentence):
                place = _place_phrase(found)
                if found.group("noun").lower() not in _NOT_PLACE_NOUNS and asked not in {
                    stem(w.lower()) for w in re.findall(r"[A-Za-z]+", place)
                }:
                    return SlotAnswer(place, message.local_id, sentence, "place")
    return None


# "full-time or part-time", "a humanities or technical background"
# "full-time or part-time", "the paperback or the ebook" (the article repeated before the second)
_ALTERNATIVES = re.compile(
    r"\b(?P<first>[\w'-]+)\s+or\s+(?:(?:the|a|an|my|his|her|their|your|our)\s+)?(?P<second>[\w'-]+)", re.I
)


def offered_answers(question: str) -> re.Match | None:
    """The two answers a question offers ("full-time or part-time"), None for a plain yes/no one
    ("Does he have any sisters or brothers?" asks whether there is either)."""
    offered = _ALTERNATIVES.search(question)
    if not offered or re.search(r"\bany\s+$", question[: offered.start()], re.I):
        return None
    return None if {w.lower() for w in offered.group("first", "second")} & STOPWORDS else offered


def _alternative(question: str, messages: Sequence[ChatMessage]) -> SlotAnswer | None:
    """A question offering two answers ("Does Kate work full-time or part-time?") is answered with
    the one an evidence sentence names (as written); None when no sentence names just one."""
    offered = offered_answers(question)
    for message in messages:
        for sentence in sentences(message.text):
            named = [
                m
                for w in offered.group("first", "second")
                if (m := re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", sentence, re.I))
            ]
            if len(named) == 1:
                return SlotAnswer(named[0].group(), message.local_id, sentence, "phrase")
    return None


def _best_phrase(question: str, messages: Sequence[ChatMessage]) -> SlotAnswer | None:
    """An open question's phrase from the sentence that shares the most words with the question,
    half a word less for each message further down the evidence (train "what" F1 .074 -> .078),
    ``ASKING_PENALTY`` less when the sentence is itself a question."""
    asked, scored, known = _question_stems(question), [], {t.lower() for t in tokens(question)}
    asking_penalty = setting("answer", "asking_penalty")
    for index, message in enumerate(messages):
        for order, sentence in enumerate(sentences(message.text)):
            if span := slot_phrases.read(sentence, question, known) or phrase_span(sentence, question):
                score = (
                    len(asked & _question_stems(sentence))
                    - 0.5 * index
                    - asking_penalty * sentence.rstrip().endswith("?")
                )
                scored.append((score, -index, -order, span, message, sentence))
    if not scored:
        return None
    *_, span, message, sentence = max(scored, key=lambda s: s[:3])
    return SlotAnswer(span, message.local_id, sentence, "phrase")


def _fill(
    question: str, intent: str, sentence: str, message: ChatMessage, entities: set[str], speakers: set[str]
) -> tuple[str, str] | None:
    if intent == "when":
        date = resolve_date(sentence, message.timestamp, habits=not _PAST_QUESTION.search(question))
        return (date, "date") if date else None
    if intent == "where":
        place = _place(sentence, question, speakers)
        return (place, "place") if place else None
    if intent == "who":
        name = _name(sentence, question, speakers)
        return (name, "name") if name else None
    if intent == "how_many":
        quantity = _quantity(sentence, question)
        return (quantity, "quantity") if quantity else None
    if intent == "yes_no":
        return ("No" if _NEGATION.search(straight_apostrophes(sentence)) else "Yes"), "yes_no"
    span = phrase_span(sentence, question)
    return (span, "phrase") if span else None


_MONTH = "|".join([*MONTH_NAMES, *_SHORT_MONTHS])
_A_DAY = re.compile(rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTH})\b|\b(?:{_MONTH})\s+\d{{1,2}}\b", re.I)
_CLOCK = re.compile(r"\b\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.)|\b\d{1,2}:\d{2}\b|^at \d{1,2}$", re.I)


def required_slot_filled(intent: str, answer: str) -> bool:
    """Whether ``answer`` holds what a question of this type asks for (a date for "when", a
    name-like word or a place phrase for "where", a name for "who", a count for "how many"); other types need any words."""
    if intent == "when":  # a date, a day as a plan gives it ("Fri 28th"), or a clock time ("What time is check-in?")
        return resolve_date(answer, datetime(2000, 1, 1)) is not None or bool(
            _CLOCK.search(answer) or PLAN.search(answer)
        )
    # a name: a capitalised word that is no day, month or "I" ("Tue" names no one)
    named = any(w.lower() not in _NOT_PLACES for w in re.findall(r"\b[A-Z][\w'’-]*", answer))
    if intent == "where":
        return named or bool((m := _LOCATIVE.match(answer)) and m.group("noun").lower() not in _NOT_PLACE_NOUNS)
    if intent == "who":
        return named
    if intent == "how_many":  # a count or an amount, never a day or a clock time ("8 November", "8:30")
        return bool(_A_COUNT.search(answer) or _DURATION.search(answer)) and not (
            _A_DAY.search(answer) or _CLOCK.search(answer)
        )
    return bool(answer.strip())
