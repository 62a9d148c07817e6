"""Who did it, read from the conversation around the evidence (offline): the writer of a message
doing the act in the first person ("I'll bring mine", "Fixed in PR #482", "Sent the deposit this
morning"), or the person a message names as doing it ("Dr Okafor swapped with me", "Booked by:
Margaret E"); for a message asking it ("Who's bringing a gazebo?"), the writer of the reply taking
it on or the person the reply names. The answer is a person: never a place, a capitalised ordinary
word ("Photo book"), part of a title ("Temporary Event Notice"), a bot, someone only addressed
("@Felix can you verify?") nor the person the question names ("Who ended up with Bea's ticket?").
"Who ended up ...?" asks for the latest; "Who took Ellie's place?" for the one settled in the place
of someone who dropped out.
"""

from __future__ import annotations

import re

from narrative_mirror.agent import countries
from narrative_mirror.agent.exchange_values import NEGATIVE
from narrative_mirror.agent.exchanges import (
    FOLLOWING,
    Said,
    asks,
    clauses,
    flagged_rows,
    lowercase_words,
    replies,
    statements,
    word_stem,
    word_stems,
)
from narrative_mirror.agent.slots import sentences
from narrative_mirror.agent.text import MONTHS, WEEKDAYS
from narrative_mirror.layers.text import STOPWORDS
from narrative_mirror.retrieval import query_names
from narrative_mirror.retrieval.chat_index import ChatIndex

# The writer alone; "we can borrow 6 tables" says the group will, not who does it
_I = r"i|i'm|i'll|i've|i'd|me|mine|my"
_THE_WRITER = re.compile(rf"\b(?:{_I})\b", re.I)
_FIRST_PERSON = re.compile(rf"\b(?:{_I}|we|we'll|we're)\b", re.I)
_TITLES = ("dr", "mr", "mrs", "ms")
_NOT_NAMES = {
    "i",
    "ok",
    "okay",
    "yes",
    "no",
    "hey",
    "hi",
    "thanks",
    "the",
    "a",
    "great",
    "nice",
    "so",
    "and",
    "but",
    *_TITLES,
}
_MENTIONS_FIRST = re.compile(r"^\W*(?:@[\w.-]+(?:\s+[A-Z][\w-]*)?[\s,:]*)+")
_TO_YOU = re.compile(r"\b(?:you|your|pls|please)\b", re.I)
_CALENDAR = set(WEEKDAYS) | {w + "s" for w in WEEKDAYS} | {m.lower() for m in MONTHS}
_ADDRESSED = re.compile(r"^\s*,?\s*(?:can|could|would|will|do|did|are|please)\s+you\b", re.I)
_I_WILL = r"i['’]ll|i will|i can"
_OFFERS = re.compile(rf"^\W*(?:{_I_WILL})\b", re.I)
# taking it on, or offering one's own ("I've got my old one, I'll bring it" to "has anyone got a spare?")
_TAKES_IT_ON = re.compile(rf"^\W*(?:{_I_WILL}|i['’]m on it|me\b|leave it (?:with|to) me|i['’]ve got|i have got)", re.I)
# A reply turning the task down: "Not me, I burn toast", "sorry can't that day"
_DECLINES = re.compile(
    r"^\W*(?:not (?:me|us|i)\b|no\b|nope|nah|sorry\b|(?:i )?can['’]?t\b|(?:i )?cannot\b|i won['’]t\b)", re.I
)
_PLACE_BEFORE = re.compile(r"\b(?:in|at|on|from|to|near|into|outside|inside|via)\s+(?:the\s+)?$", re.I)


_IRREGULAR = {
    "found": "find",
    "broke": "break",
    "gave": "give",
    "got": "get",
    "paid": "pay",
    "brought": "bring",
    "took": "take",
    "made": "make",
    "bought": "buy",
    "sent": "send",
    "left": "leave",
    "went": "go",
    "came": "come",
    "said": "say",
    "told": "tell",
    "won": "win",
    "drove": "drive",
    "wrote": "write",
    "saw": "see",
    "ran": "run",
    "met": "meet",
    "sold": "sell",
    "kept": "keep",
    "lost": "lose",
    "lent": "lend",
}


# "Who ended up driving?", "Who actually bought it?": the last state of a plan that changed
_FINAL = r"ended up|end up|ends up|actually|finally|eventually|in the end|after all"
_ASKS_FINAL = re.compile(rf"\b(?:{_FINAL})\b", re.I)


def _act(question: str) -> set[str]:
    """Stems of the verb of a who-question ("Who fixed ..." -> fix, "Who gave ..." -> give, gave;
    "Who ended up driving?" -> drive)."""
    m = re.match(
        rf"\W*who(?:\s+(?:is|was|will|would|can|could|has|had|did|does)|['’]s)?\s+(?:(?:{_FINAL})\s+)?([a-z]+)",
        question.lower(),
    )
    if not m or m.group(1) in STOPWORDS:
        return set()
    word = m.group(1)
    return {word_stem(word), word, *([word_stem(_IRREGULAR[word]), _IRREGULAR[word]] if word in _IRREGULAR else [])}


def who(chat: ChatIndex, said: list[Said], about: set[str], question: str):
    """The person doing what the question asks (its verb, or only its object when no message has
    the verb): the person a statement names before the verb, or its writer speaking of
    themselves ("I'll fix it today", "Fixed in PR #482"); for a message asking it, its reply's
    writer or the person the reply names ("That was Sofia's friend Jonas")."""
    speakers = {s.lower(): s for s in chat.speaker_names}
    if ASKS_REPLACEMENT.search(question) and (found := _replacement(chat, question, speakers)):
        return found
    # a speaker by first name or alias too ("marek already the MVP"), where it names one only
    firsts = [s.split()[0].lower() for s in chat.speaker_names]
    speakers |= {f: s for f, s in zip(firsts, chat.speaker_names) if firsts.count(f) == 1 and f not in speakers}
    speakers |= {a.lower(): s for a, s in chat.aliases.items() if a.lower() not in speakers}
    act = _act(question)
    about = about - {word_stem(w) for w in re.findall(r"[a-z]+", _FINAL)}
    found = _doer(chat, said, about, act, speakers, question)
    # "Who helped Mara ...?", "Who ended up with Bea's ticket?" ask for someone other than Mara, Bea
    if found and not re.search(rf"\b{re.escape(found[0].split()[0])}\b", question.split(None, 1)[-1]):
        return found
    return None


# "Who's coming instead of Laura?", "Who took Ellie's place?", "Who stood in on drums?"
ASKS_REPLACEMENT = re.compile(
    r"\b(?:instead of|in place of|in \w+['’]s (?:place|spot)|\w+['’]s (?:place|spot)|replac\w*|stood in|stand(?:s|ing)? in|"
    r"dep(?:ped|ping)?)\b",
    re.I,
)
# A message offering or settling someone in another's place
_TAKES_PLACE = re.compile(
    r"\b(?:tak(?:e|es|ing)|took)\s+(?:your|his|her|their|the|\w+['’]s)\s+(?:place|spot|ticket)|\btransfer\w*\b"
    r"|\bdep(?:ped|ping|s)?\b|\bst(?:and|ood|anding)\s+in\b|\bwould\s+(?:100%\s+)?(?:take it|be up for it)\b",
    re.I,
)


def _replacement(chat: ChatIndex, question: str, speakers: dict[str, str]):
    """Who takes another's place: from the first message after the person named in the question
    drops out (else from the chat's start) that offers or settles someone in the place ("Our
    cousin Megan ... she'd 100% take your place", "what about Kit? he depped for us"), the person
    it names other than the one replaced; None when no such message names one."""
    replaced = set(query_names.persons(question, chat.speaker_names, chat.aliases))
    first_names = {p.split()[0].lower() for p in replaced}
    dropped_out = (r for r in range(chat.size) if chat.speakers[r] in replaced and NEGATIVE.search(chat.raw_texts[r]))
    start = next(dropped_out, 0)
    flagged = flagged_rows(chat)
    for row in range(start, chat.size):
        text = chat.raw_texts[row]
        if row in flagged or not _TAKES_PLACE.search(text):
            continue
        for m in re.finditer(r"(?<![\w@])([A-Z][a-zë-ÿ]+)", text):
            name, before = m.group(1), text[: m.start()]
            if (
                name.lower() in first_names
                or name.lower() in _NOT_NAMES
                or name.lower() in lowercase_words(chat)
                and name.lower() not in speakers
                or name.lower() in _CALENDAR
                or re.search(r"(?:^|[.!?]\s*)$", before)
                and not query_names.persons(name, chat.speaker_names, chat.aliases)
                or re.match(r"^['’]s\s+(?:place|spot)", text[m.end() :])
            ):
                continue
            # cited with the message of the one replaced dropping out: the answer rests on both
            return speakers.get(name.lower(), name), [row, start] if replaced and start != row else [row], "name", text
    return None


def _doer(chat: ChatIndex, said: list[Said], about: set[str], act: set[str], speakers: dict[str, str], question: str):
    # what is done, the people it is done for aside when more is named ("Who sorted the cake for
    # Nana?": the cake)
    names = {word_stem(w.lower()) for w in re.findall(r"(?<=\s)[A-Z][a-z]+", question)}
    thing = about - act - names or about - act
    if _ASKS_FINAL.search(question):  # who did it in the end: the latest message saying so
        said = sorted(said, key=lambda s: -chat.positions[s.row])
    # A message saying both the act and its object, or asking about both and answered ("Who's
    # bringing games?" -> "Me, I've got Ticket to Ride"), before one with the act alone ("I'll
    # bring the speaker").
    passes = [(act, thing)] if act and thing else []
    passes += [(act, set())] if act else []
    passes += [(thing, set())]
    for wanted, also in passes:
        found = _stated_doer(chat, said, wanted, also, act, speakers) or _answered_doer(
            chat, said, wanted, also, speakers
        )
        if found:
            return found
    return None


def _stated_doer(chat, said, wanted, also, act, speakers):
    """The person a statement sharing ``wanted`` (and ``also``) names before the act, or its
    writer speaking of themselves."""
    for item in said:
        text = chat.raw_texts[item.row]
        if wanted is act and (name := _done_by(text, act, speakers, lowercase_words(chat))):
            return name, [item.row], "name", text
        for sentence in statements(text):
            words = word_stems(sentence)
            if not words & wanted or (also and not words & also) or asks(sentence):
                continue
            # "@Fiona MacLeod sent the deposit, can you let them know": Fiona is told, the writer
            # sent it ("@Felix will demo it, I'll do the numbers": Felix will)
            if _TO_YOU.search(text):
                sentence = _MENTIONS_FIRST.sub("", sentence)
            # someone not in the chat only as the one doing the act ("Dr Okafor swapped with me"),
            # not as a name written before the thing ("Tickets for Mamma Mia or a photo book")
            strangers = wanted is act
            if name := _named(sentence, speakers, wanted, ordinary=lowercase_words(chat), strangers=strangers):
                return name, [item.row], "name", text
            if chat.bots[item.row]:  # a bot's "Booking updated" is no person's act
                continue
            # "Found a nasty bug", "Sent the deposit this morning": its writer found it, sent it
            opening = re.match(r"^\W*([A-Za-z]+)", sentence)
            word = opening.group(1).lower() if opening else ""
            elliptic = word in act or word in _IRREGULAR or word.endswith("ed") and len(word) > 4
            if _THE_WRITER.search(sentence) or elliptic:
                # "can't do the strimming": the one taking it over instead ("I can do the design, not
                # printing though" is done: the clause with the act is what counts)
                if any(NEGATIVE.search(c) for c in clauses(sentence) if word_stems(c) & wanted):
                    if taker := _taking_over(chat, item.row):
                        return chat.speakers[taker], [taker, item.row], "author", chat.raw_texts[taker]
                    continue
                return chat.speakers[item.row], [item.row], "author", text
    return None


def _taking_over(chat: ChatIndex, row: int) -> int | None:
    """The first message after ``row`` (its writer withdrawing) in the same session, by someone
    else, taking the task on ("Anyone fancy the strimmer?" -> "I'll do it"); None when none does."""
    for r in range(row + 1, min(row + 1 + 2 * FOLLOWING, chat.size)):
        if chat.sessions[r] != chat.sessions[row]:
            break
        if chat.speakers[r] != chat.speakers[row] and not chat.bots[r] and _TAKES_IT_ON.match(chat.raw_texts[r]):
            return r
    return None


def _done_by(text: str, act: set[str], speakers: dict[str, str], ordinary: frozenset[str]) -> str | None:
    """The person a passive names ("Booked by: Margaret E", "paid by Tom"), for the act asked."""
    for m in re.finditer(r"([A-Za-z]+)\s+by:?\s+@?([A-Z][a-z]+)", text):
        first = m.group(2).lower()
        if word_stem(m.group(1).lower()) in act and (first in speakers or first not in ordinary | _NOT_NAMES):
            return _as_written(m.group(2), speakers)
    return None


def _as_written(name: str, speakers: dict[str, str]) -> str:
    """A name as the message writes it (a claim is checked against its message), in the speaker's
    own case when it is the speaker's whole name ("priya" -> "Priya")."""
    speaker = speakers.get(name.lower())
    return speaker if speaker and speaker.lower() == name.lower() else name


def _answered_doer(chat, said, wanted, also, speakers):
    """For an evidence message asking about ``wanted`` (and ``also``): its writer when it offers
    to do it ("I'll set up a page tonight, ok with everyone?"), else its reply's writer taking it
    on, or the person the reply names."""
    for item in said:
        text = chat.raw_texts[item.row]
        asked = [
            x for x in sentences(text) if asks(x) and word_stems(x) & wanted and (not also or word_stems(x) & also)
        ]
        if not asked or item.role != "evidence":
            continue
        if any(_OFFERS.search(x) for x in asked):
            return chat.speakers[item.row], [item.row], "author", text
        for reply in replies(chat, item.row):
            answer_text = chat.raw_texts[reply]
            if asks(answer_text) or chat.bots[reply] or _DECLINES.match(answer_text):
                continue
            # "I'll do it, I've used Castle Rock Hostel before": its writer takes it on; the
            # names after that are what they speak of
            if _TAKES_IT_ON.match(answer_text):
                return chat.speakers[reply], [reply, item.row], "author", answer_text
            if name := _named(answer_text, speakers, wanted, anywhere=True, ordinary=lowercase_words(chat)):
                if speakers.get(name.split()[0].lower(), name) != chat.speakers[item.row]:
                    return name, [reply, item.row], "name", answer_text
            if _FIRST_PERSON.search(answer_text) or re.match(r"^\W*(?:yes|yep|sure|me)\b", answer_text, re.I):
                return chat.speakers[reply], [reply, item.row], "author", answer_text
    return None


def _named(
    text: str,
    speakers: dict[str, str],
    about: set[str],
    anywhere: bool = False,
    ordinary: frozenset[str] = frozenset(),
    strangers: bool = True,
) -> str | None:
    """A person the text names as doing the act: a name before a word of the act (or anywhere in a
    reply), not someone addressed ("@Felix can you ..."), not owning something ("Sofia's
    friend"), not a place ("on Deansgate"), not an ``ordinary`` word capitalised ("Photo book")."""
    places = {p.lower() for p, _ in countries.countries_in(text)}
    tokens = list(re.finditer(r"@?[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?", text))
    act_at = min(
        (m.start() for m in re.finditer(r"[A-Za-z0-9'-]+", text) if word_stem(m.group().lower()) in about),
        default=len(text),
    )
    names = []
    for m in tokens:
        name = m.group().lstrip("@")
        first = name.split()[0].lower()
        after, before = text[m.end() :], text[: m.start()]
        if first in _NOT_NAMES or first in _CALENDAR or name.lower() in places or _PLACE_BEFORE.search(before):
            if first in _TITLES and len(name.split()) > 1:
                name = name  # a title and a name: the name with its title
            else:
                continue
        if m.start() == 0 or re.search(r"[.!?:\n]\s*$", before):  # a line's or sentence's first word: a known speaker
            if first not in speakers and first not in _TITLES:
                continue
        at_start = m.start() == 0 or bool(re.search(r"[.!?]\s*$", before))
        if re.match(r"^['’]s\b", after) or _ADDRESSED.match(after) or (at_start and after.lstrip().startswith(",")):
            continue
        if not anywhere and m.start() > act_at:
            continue
        # someone not in the chat: one capitalised name, not an ordinary word nor part of a longer
        # title ("a Temporary Event Notice")
        longer = re.match(r"^\s+[A-Z][a-z]", after) or re.search(r"[A-Z][a-z]+\s+$", before)
        if first not in speakers and (
            not strangers or longer or any(w.lower() in ordinary for w in name.split()) and first not in _TITLES
        ):
            continue
        names.append(_as_written(name, speakers))
    return names[-1] if names else None
