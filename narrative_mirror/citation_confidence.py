"""How well each cited message supports what the answer says with it (the retrieval-events design's citation
confidence), graded rather than 0/1.

A claim and one message it cites are compared on up to four independent signals, each in [0, 1];
the confidence is their mean over the signals that apply:
- ``words``: the share of the claim's content-word stems (names aside) found in the message (a claim of no
  content word of its own, "Yes", has none: it is read with its question for the cosine);
- ``values``: the share of the claim's typed values found in the message: its date (the message's
  own date expressions resolved against when it was written: "yesterday" said on 8 May states
  "7 May 2023"), its numbers (digits or number words) and its names (capitalised words; the
  message's speaker counts as named in it);
- ``slot``: whether the message states what the question asks for (a date for "when", a place
  for "where", a name for "who", a count for "how many"); types without a slot have none;
- ``cosine``: the embedder's cosine between claim and message, mapped from [COSINE_FLOOR,
  COSINE_FULL] onto [0, 1] (MiniLM: unrelated chat lines score about 0.1, a paraphrase 0.7+).

Per cited id the confidence is its best claim's; an answer's confidence is the mean over its cited
ids, and an answer that cites nothing (an abstention) has none (None), not a certain 1.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from narrative_mirror.agent import dates, slots
from narrative_mirror.agent.text import stems
from narrative_mirror.citations import detect_citations
from narrative_mirror.layers.text import STOPWORDS, straight_apostrophes, tokens

COSINE_FLOOR, COSINE_FULL = 0.1, 0.7
SLOT_INTENTS = ("when", "where", "who", "how_many")
ANSWER_WORDS = {"yes", "no", "not", "yeah", "nope"}
# Capitalised words that name no person, place or thing: months and weekdays are read as dates.
_CALENDAR = {m.lower() for m in dates.MONTH_NAMES} | set(dates.WEEKDAY_NUMBERS)
_NOT_NAMES = _CALENDAR | STOPWORDS | ANSWER_WORDS
_NOT_WORDS = _CALENDAR | ANSWER_WORDS  # graded as the claim's date, or they are the answer's form
_NUMBER = re.compile(r"\b\d+(?:[.,]\d+)?\b")
_CAPITALISED = re.compile(r"\b[A-Z][\w'-]+")
_NO_DATE = datetime(2000, 1, 1)  # resolves a claim's absolute date; a claim states its dates in full


@dataclass(frozen=True)
class CitedMessage:
    text: str
    said: datetime | None = None  # when it was written: resolves "yesterday"
    speaker: str | None = None  # who wrote it: "Ana baked ..." is borne out by Ana's own message


def _numbers(text: str) -> set[str]:
    found = {n.replace(",", ".") for n in _NUMBER.findall(text)}
    return found | {str(dates.NUMBER_WORDS[t]) for t in tokens(text) if t in dates.NUMBER_WORDS}


def _names(text: str) -> set[str]:
    return {m.lower().removesuffix("'s") for m in _CAPITALISED.findall(straight_apostrophes(text))} - _NOT_NAMES


def typed_values(claim: str) -> tuple[str | None, set[str], set[str]]:
    """(date, numbers, names) a claim states."""
    day = dates.resolve_date(claim, _NO_DATE, habits=False)
    numbers = _numbers(claim) if day is None else set()  # a date's digits are the date's
    return day, numbers, _names(claim)


def _values_share(claim: str, message: CitedMessage) -> float | None:
    day, numbers, names = typed_values(claim)
    wanted = (1 if day else 0) + len(numbers) + len(names)
    if not wanted:
        return None
    found = 0
    if day:
        found += day in {dates.resolve_date(s, message.said or _NO_DATE) for s in slots.sentences(message.text)}
    found += len(numbers & _numbers(message.text))
    found += len(names & {t.removesuffix("'s") for t in tokens(f"{message.speaker or ''} {message.text}")})
    return found / wanted


def _words_share(claim: str, message: str) -> float | None:
    words = stems(claim, exclude=_NOT_WORDS | _names(claim))  # names are graded as typed values
    return len(words & stems(message)) / len(words) if words else None


def scaled_cosine(cosine: float) -> float:
    return float(min(1.0, max(0.0, (cosine - COSINE_FLOOR) / (COSINE_FULL - COSINE_FLOOR))))


def claim_confidence(
    claim: str, message: CitedMessage, intent: str | None = None, cosine: float | None = None
) -> float:
    """How well ``message`` supports ``claim`` in [0, 1] (the module's signals; 0.5 when none applies)."""
    signals = [
        _words_share(claim, message.text),
        _values_share(claim, message),
        float(slots.required_slot_filled(intent, message.text)) if intent in SLOT_INTENTS else None,
        None if cosine is None else scaled_cosine(cosine),
    ]
    present = [s for s in signals if s is not None]
    return sum(present) / len(present) if present else 0.5


def cited_confidences(
    claims: Sequence[tuple[str, Sequence[str]]],
    messages: Mapping[str, CitedMessage],
    question: str = "",
    intent: str | None = None,
    embedder=None,
) -> dict[str, float]:
    """Per cited id (first citation order) the confidence of its best claim; an id whose message
    cannot be read scores 0. ``embedder`` (``Embedder``): adds the cosine signal."""
    pairs = [(text, i) for text, ids in claims for i in dict.fromkeys(ids)]
    cosines: list[float | None] = [None] * len(pairs)
    readable = [(n, text, i) for n, (text, i) in enumerate(pairs) if i in messages]
    if embedder is not None and readable:
        # A claim with no content word of its own ("Yes") says something only with its question.
        read_as = [text if stems(text, exclude=_NOT_WORDS) else f"{question} {text}" for _, text, _ in readable]
        vectors = np.asarray(embedder.encode(read_as + [messages[i].text for _, _, i in readable]))
        half = len(readable)
        for k, (n, _, _) in enumerate(readable):
            cosines[n] = float(vectors[k] @ vectors[half + k])
    best: dict[str, float] = {}
    for (text, i), cosine in zip(pairs, cosines):
        score = claim_confidence(text, messages[i], intent, cosine) if i in messages else 0.0
        best[i] = max(best.get(i, 0.0), score)
    return best


def mean_confidence(per_id: Sequence[float]) -> float | None:
    """An event's citation confidence: the mean over its cited ids; None when it cites nothing."""
    return sum(per_id) / len(per_id) if per_id else None


def answer_citations(
    answer, returned: Mapping[str, str], read: Callable[[Sequence[str]], Mapping[str, CitedMessage]], embedder=None
) -> tuple[list[str], list[float], float | None]:
    """(cited ids, their confidences, the event's confidence) of an ``AgentAnswer``: its verified
    claims' ids, or for an answer without claims (the one-shot path) the messages of ``returned``
    (id -> text) the heuristic finds in its text, the answer being their claim. ``read``: id ->
    ``CitedMessage`` of the cited ids."""
    if answer.claims:
        claims = [(c.text, c.ids) for c in answer.claims if c.supported]
    else:
        found, _ = detect_citations(answer.answer, list(returned.items()))
        claims = [] if answer.abstained or not found else [(answer.answer, found)]
    cited = list(dict.fromkeys(i for _, ids in claims for i in ids))
    per_id = cited_confidences(claims, read(cited) if cited else {}, answer.question, answer.facets.intent, embedder)
    values = [per_id[i] for i in cited]
    return cited, values, mean_confidence(values)


INDEPENDENT_MIN = 0.5
INDEPENDENT_CHECK = (
    f"lexical + typed values: the claim's content words, dates, numbers and names found in its "
    f"cited messages (>= {INDEPENDENT_MIN}; no NLI, not the answerer's verifier)"
)


def independently_supported(claim: str, question: str, cited: Sequence[CitedMessage]) -> bool:
    """The agentic-RAG design's check of a claim by other means than the answerer's verifier
    (``INDEPENDENT_CHECK``): its best cited message bears out at least ``INDEPENDENT_MIN`` of its
    words and typed values; a claim of no content word of its own is read with its question."""
    text = claim if stems(claim, exclude=_NOT_WORDS) or typed_values(claim)[0] else f"{question} {claim}"
    return any(claim_confidence(text, message) >= INDEPENDENT_MIN for message in cited)
