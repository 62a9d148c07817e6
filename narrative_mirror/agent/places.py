"""Where-questions read from the exchange around the evidence (offline).

A group settles a place the way it settles a day: someone asks ("Drinks after? Kings Head as
usual?") and a reply names it ("Cotham Porter Stores then?"), or a later message moves it ("the
Skyrack has a private function ... Original Oak instead?"). So the place is read from the reply
to a message asking it, then from the latest message that changes it, as ``when`` reads days.

A place here is a name the chat writes with capitals ("Original Oak", "Kirkstall Road",
"Crown and Anchor"): a run of capitalised words that is no person of the chat, day, month or
shouting ("CHANGE OF PLAN"); a sentence's first words the chat also writes in lower case are
dropped ("Booked Quayside"), and a single word opening a sentence counts only when offered as a
choice ("Shannon or Knock?").
"""

from __future__ import annotations

import re

from narrative_mirror.agent.dates import MONTH_NAMES, WEEKDAY_NUMBERS
from narrative_mirror.agent.exchange_values import NEGATIVE, kept
from narrative_mirror.agent.exchanges import (
    Said,
    asks,
    content_stems,
    later_changes,
    lowercase_words,
    people_words,
    replies,
    word_stems,
)
from narrative_mirror.agent.slots import home_place, sentences
from narrative_mirror.layers.text import STOPWORDS
from narrative_mirror.retrieval.chat_index import ChatIndex

_CAPITALISED = re.compile(r"(?<![\w@#'’])[A-Z][\w'’&-]*(?:\s+(?:(?:of|and|&)\s+)?[A-Z][\w'’&-]*)*")
_JOINS = ("of", "and", "&")  # inside a name: "Crown and Anchor", "Isle of Dogs"
_NOT_NAMES = {m.lower() for m in MONTH_NAMES} | {d for w in WEEKDAY_NUMBERS for d in (w, w[:3])} | {"i"}
# A place is settled in exchanges among three or more people; in a two-person chat a question in the
# evidence is mostly about the other's life, and a capitalised word in its reply no place (RealTalk
# train: 10 answers changed, F1 .302 -> .295, when read in two-person chats too).
GROUP = 3
_ASKS_PLACE = re.compile(r"\b(?:where|which|venue)\b", re.I)
# a place said to be unavailable is no answer: "Kings Head is shut for a refurb"
_CLOSED = re.compile(r"\b(?:shut|closed|closes|full|booked up|double[- ]booked|off limits)\b", re.I)


class PlaceNames:
    """The place names of a text (``finditer``, as ``later_changes`` reads a type's values)."""

    def __init__(self, chat: ChatIndex):
        self.ordinary = lowercase_words(chat)
        self.people = people_words(chat)

    def finditer(self, text: str, asked: str = "") -> list[_Place]:
        """The place names of ``text`` (``asked``: the message it answers, whose choices it may name)."""
        found = []
        for sentence in re.finditer(r"[^.!?\n]+[.!?]*", text):
            for run in _CAPITALISED.finditer(sentence.group(0)):
                at_start = not sentence.group(0)[: run.start()].strip(" \t\"'(*-–")
                for place in self._names(run, sentence.start(), at_start):
                    single = " " not in place.text
                    if (
                        at_start
                        and place.start() == sentence.start() + run.start()
                        and single
                        and not _offered(place.text, f"{text}\n{asked}")
                    ):
                        continue  # "Also", "Shannon.": a sentence's first word, unless offered ("Shannon or Knock?")
                    found.append(place)
        return found

    def _names(self, run: re.Match, offset: int, at_start: bool) -> list[_Place]:
        """The runs of words of ``run`` that may name a place: no person of the chat, day, month,
        "I'm" or function word; a sentence's first words the chat writes in lower case dropped
        ("Booked Quayside"); none shouted, nor one whose every word the chat writes in lower case."""
        words = list(re.finditer(r"\S+", run.group(0)))
        keep = [not self._never(w.group(0)) for w in words]
        if at_start:
            for i, w in enumerate(words):
                if not keep[i] or _bare(w.group(0)) not in self.ordinary:
                    break
                keep[i] = False
        out, i = [], 0
        while i < len(words):
            if not keep[i]:
                i += 1
                continue
            j = i
            while j + 1 < len(words) and keep[j + 1]:
                j += 1
            names = [_bare(w.group(0)) for w in words[i : j + 1]]
            written = [w.group(0) for w in words[i : j + 1]]
            # shouted ("CHANGE OF PLAN", "BIG NEWS"): every word in capitals, one of four letters or
            # more; an acronym ("KS1", "UK") is a name
            shouted = all(w.isupper() for w in written) and any(len(n) >= 4 for n in names)
            if not shouted and not all(n in self.ordinary or n in _JOINS for n in names) and names[-1] not in _JOINS:
                text = run.group(0)[words[i].start() : words[j].end()]
                out.append(_Place(re.sub(r"['’]s$", "", text), offset + run.start() + words[i].start()))
            i = j + 1
        return out

    def _never(self, word: str) -> bool:
        bare = _bare(word)
        return (
            bare in self.people
            or bare in _NOT_NAMES
            or bare in STOPWORDS
            and bare not in _JOINS
            or bare.startswith("i'")
        )

    def usable(self, text: str, asked: str = "") -> list[str]:
        """The places of ``text`` it does not reject ("not X", "X is shut"), as written; with
        ``asked`` (the message it answers), a choice that message offers first ("Victoria." to
        "Piccadilly or Victoria?"), then the places that message does not name."""
        out = []
        for sentence in sentences(text):
            if _CLOSED.search(sentence) or NEGATIVE.search(sentence):
                continue
            out += [m.group(0) for m in kept(self.finditer(sentence, asked), sentence)]
        if not asked:
            return out
        chosen = [p for p in out if _offered(p, asked)]
        return chosen or [p for p in out if p.lower() not in asked.lower()]


class _Place:
    """A place name found in a text, as a match (``kept`` and ``later_changes`` read matches)."""

    def __init__(self, text: str, start: int):
        self.text, self._start = text, start

    def group(self, index: int = 0) -> str:
        return self.text

    def start(self) -> int:
        return self._start


def _bare(word: str) -> str:
    return re.sub(r"['’]s$", "", word.strip(".,!?;:\"'()")).lower().replace("’", "'")


def _offered(name: str, text: str) -> bool:
    """Whether ``text`` offers ``name`` as one of a choice ("Shannon or Knock Paddy?")."""
    return re.search(rf"\b(?:or\s+){re.escape(name)}\b|\b{re.escape(name)}\s+or\b", text) is not None


def where(chat: ChatIndex, said: list[Said], about: set[str], question: str):
    """A person's home given as the place ("I can host at mine"), else, in a group chat, the place
    a reply to the best evidence message names when that message asks for one, replaced by the
    latest message that moves it; None when the exchange names none (a place in the evidence is
    read then)."""
    if found := _home(chat, said, about):
        return found
    if len(chat.speaker_names) < GROUP:
        return None  # two people answer each other's questions about themselves, not settle a place
    first = next((s for s in said if s.role == "evidence" and word_stems(chat.raw_texts[s.row]) & about), None)
    if first is None:
        return None
    places = PlaceNames(chat)
    text = chat.raw_texts[first.row]
    row = place = None
    asked = [t for t in sentences(text) if asks(t)]
    if any(_ASKS_PLACE.search(t) or places.finditer(t) for t in asked):  # "Which Enterprise?", "Kings Head as usual?"
        for r in replies(chat, first.row):  # "Cotham Porter Stores then?" proposes one too
            if named := places.usable(chat.raw_texts[r], asked=text):
                row, place = r, named[0]
                break
    if row is None and not places.finditer(text):
        return None  # no place asked, none said: nothing to change
    base = first.row if row is None else row
    said_before = (text + " " + chat.raw_texts[base]).lower()
    for r in reversed(later_changes(chat, base, about | content_stems(text), lambda t: bool(places.usable(t)), places)):
        if new := [p for p in places.usable(chat.raw_texts[r]) if p.lower() not in said_before]:
            row, place = r, new[0]
            break
    if row is None:
        return None
    return place, [row, first.row], "place", chat.raw_texts[row]


def _home(chat: ChatIndex, said: list[Said], about: set[str]):
    """A where-question answered with a person's home ("Book club this Thursday, who's hosting?"
    answered by Omar's "I can host at mine": at Omar's place), from a message about the
    question's topic: the best evidence message or a reply to an evidence message asking
    something; None when neither names a home."""
    for s in said:
        text = chat.raw_texts[s.row]
        if not (s is said[0] or (s.role == "reply" and asks(chat.raw_texts[s.of]))):
            continue
        if not (word_stems(text) | word_stems(chat.raw_texts[s.of])) & about:
            continue
        # a home offered as a question is a proposal ("Barbecue at mine to celebrate?")
        if home := home_place(text, chat.speakers[s.row]):
            return home, [s.row, s.of] if s.row != s.of else [s.row], "home", text
    return None
