"""The conversation's readers of reasons, plans and verdicts (agent/conversation.py dispatches to
them): why (the reason clause, the reply that explains, the writer's message before), when (the
later message that moves a plan), yes/no (the statement that says it, a plan changed since) and
where from (the statement saying "from ...")."""

from __future__ import annotations

import re
from collections import Counter

from narrative_mirror.agent.exchange_values import NEGATIVE, PLAN, TIME, kept
from narrative_mirror.agent.exchanges import (
    FOLLOWING,
    PROPOSES,
    Said,
    asks,
    clauses,
    content_stems,
    later_changes,
    per_chat,
    replies,
    statements,
    word_stems,
)
from narrative_mirror.agent.slots import sentences
from narrative_mirror.retrieval import query_names
from narrative_mirror.retrieval.chat_index import ChatIndex

STILL = re.compile(r"\b(?:still|any ?more|after all)\b", re.I)  # a question about a plan's status now
_CAUSE = re.compile(r"\b(?:because|since|due to|given|as a result of|'cause|cos)\b\s*(.+)", re.I)


def why(chat: ChatIndex, said: list[Said], about: set[str], question: str):
    """The reason, from the messages sharing most of the question's words: a clause after a
    causal word ("given the migration delay"); for a message asking about the thing, its reply
    ("Is anyone using the bike?" -> "It's my cousin's, he left it ..."); for one telling the
    thing, the reply that explains it (shares its words, adds its own); else the message's clause
    that does not restate the question ("Can't Thursday, I have parent-teacher night"); else its
    writer's message before ("my sister's graduation got moved" before "Can we move it?"). A
    question why someone does not ("Why can't Dev come?") is answered by that person first."""
    if withdrawn := _withdrawal_reason(chat, said, question):
        return withdrawn
    # about the question's thing, or written by the person it names ("Why couldn't we do it at
    # Rhys's place?": Rhys's "bad news, ... the whole garage tripped")
    named = set(query_names.persons(question, chat.speaker_names, chat.aliases))
    ranked = sorted(
        (
            s
            for s in said
            if s.role == "evidence" and (word_stems(chat.raw_texts[s.row]) & about or chat.speakers[s.row] in named)
        ),
        key=lambda s: -len(word_stems(chat.raw_texts[s.row]) & about),
    )
    if not any(_CAUSE.search(chat.raw_texts[s.row]) for s in ranked) and (told := _bad_news(chat, ranked)):
        return told
    if NEGATIVE.search(question) and (refused := _refused(chat, ranked)):
        return refused
    for s in ranked:
        text = chat.raw_texts[s.row]
        if (m := _CAUSE.search(text)) and not text[m.start() :].rstrip().endswith("?"):
            return clauses(m.group(0))[0], [s.row], "phrase", text
        if _SO.search(text) and (reason := _reason(text, about)):  # "the skip's going in front of the gate so ..."
            return reason, [s.row], "phrase", text
        # a reply accepting the change or echoing it ("fine by me", "Cobden Lane gate, 9:45, got it")
        # explains nothing
        answers = [
            r for r in replies(chat, s.row) if not asks(chat.raw_texts[r]) and not _ACCEPTS.search(chat.raw_texts[r])
        ]
        if asks(text) and not PROPOSES.search(text):
            for r in answers:  # the reply's sentence, whole: "It's my cousin's, he left it when he moved to Leipzig."
                if reason := _reason(chat.raw_texts[r], set(), whole=True):
                    return reason, [r, s.row], "phrase", chat.raw_texts[r]
        explaining = sorted(
            (r for r in answers if word_stems(chat.raw_texts[r]) & about),
            key=lambda r: -len(word_stems(chat.raw_texts[r]) & about),
        )
        for r in explaining:  # its sentence sharing most of the question's words
            told = max(statements(chat.raw_texts[r]) or [""], key=lambda x: len(word_stems(x) & about))
            if len(re.findall(r"[A-Za-z]{2,}", told)) >= 3:
                return told.strip(), [r, s.row], "phrase", chat.raw_texts[r]
        if reason := _reason(text, about):
            return reason, [s.row], "phrase", text
        before = s.row - 1
        if (
            before >= 0
            and chat.speakers[before] == chat.speakers[s.row]
            and chat.sessions[before] == chat.sessions[s.row]
        ):
            if reason := _reason(chat.raw_texts[before], set()):
                return reason, [before, s.row], "phrase", chat.raw_texts[before]
    return None


# What a message explaining a change says: news that something went wrong ("Bad news. The Fox just
# rang, there's been a burst pipe upstairs"), a thing that broke, closed or was cancelled.
_BAD_NEWS = re.compile(
    r"\b(?:bad news|disaster|unfortunately|turns out|cancel(?:led|ed|s)?|called off|closed|shut|burst|"
    r"broke|broken|flood(?:ed|ing)?|fractured|injured|strike|tripped|tripping|overrun(?:ning)?|running over|"
    r"double[- ]booked|out of action)\b",
    re.I,
)


def _bad_news(chat: ChatIndex, ranked: list[Said]):
    """A message about the question's thing that tells what went wrong, its sentences that say
    it whole (the best ranked of those sharing most words); None when none does."""
    for s in ranked:
        text = chat.raw_texts[s.row]
        # told, not asked ("Is the pub closed?"); a message may ask after telling it ("can
        # everyone do Sunday instead?")
        told = [x.strip() for x in statements(text) if len(re.findall(r"[A-Za-z]{2,}", x)) >= 3]
        if any(_BAD_NEWS.search(x) for x in told):
            return " ".join(told[:2]), [s.row], "phrase", text
    return None


def _refused(chat: ChatIndex, ranked: list[Said]):
    """Why something is not happening, from the reply refusing a message that asks for it ("are we
    doing a bar?" - "we can't this time I'm afraid. you need a Temporary Event Notice ..."): the
    reply's statements; None when no asking message has a refusing reply."""
    for s in ranked:
        if not asks(chat.raw_texts[s.row]):
            continue
        for r in replies(chat, s.row):
            text = chat.raw_texts[r]
            if NEGATIVE.search(text) and not asks(text):
                told = [x.strip() for x in statements(text) if len(re.findall(r"[A-Za-z]{2,}", x)) >= 3]
                if told:
                    return " ".join(told[:2]), [r, s.row], "phrase", text
    return None


def _withdrawal_reason(chat: ChatIndex, said: list[Said], question: str):
    """Why a person the question names does not do something, from their message saying so: their
    next message when another asked them why in between ("I can't make Whitby anymore" - "why?" -
    "My boss moved the audit to that weekend"), else the message's other statement ("Sorry, I'm
    out. My sister's wedding got moved to Saturday")."""
    named = query_names.persons(question, chat.speaker_names, chat.aliases)
    if not named or not NEGATIVE.search(question):
        return None
    for s in said:
        text, speaker = chat.raw_texts[s.row], chat.speakers[s.row]
        if speaker not in named or not NEGATIVE.search(text) or asks(text):
            continue
        asked_why = False
        for r in range(s.row + 1, min(s.row + 1 + 2 * FOLLOWING, chat.size)):
            if chat.sessions[r] != chat.sessions[s.row]:
                break
            if chat.speakers[r] != speaker:
                asked_why = asked_why or bool(
                    re.search(r"\bwhy\b", chat.raw_texts[r], re.I) and asks(chat.raw_texts[r])
                )
            elif asked_why and (told := statements(chat.raw_texts[r])):
                return " ".join(told).strip(), [r, s.row], "phrase", chat.raw_texts[r]
            else:
                break
        rest = [x for x in statements(text) if not NEGATIVE.search(x) and len(re.findall(r"[A-Za-z]{2,}", x)) >= 4]
        # the reason in the withdrawing sentence itself: "work are sending me to Lisbon that week and
        # I'm not back till the Sunday, so I can't do the 14th"
        rest = rest or [
            part
            for x in statements(text)
            for part in re.split(r"[,;:]\s+|\s+(?:and|so|but)\s+", x)
            if not NEGATIVE.search(part) and len(re.findall(r"[A-Za-z]{2,}", part)) >= 4
        ]
        if rest:
            return rest[0].strip().rstrip("."), [s.row], "phrase", text
    return None


_SO = re.compile(r",?\s+(?:so|which means|that's why|that is why)\s+", re.I)

_ACCEPTS = re.compile(
    r"^\W*(?:\w+ )?(?:works|fine|ok|okay|sure|yes|yep|yeah|agreed|deal|sounds good|perfect|great|no problem)\b"
    r"|\b(?:got it|noted|will do)\W*$",
    re.I,
)

# A heading that announces news explains nothing: "CHANGE OF PLAN.", "Bad news guys"
_ANNOUNCES = re.compile(r"^\W*(?:change of plans?|(?:bad |good )?news|update|heads up|psa|fyi)\b[\w\s]{0,12}\W*$", re.I)


def _reason(text: str, effect: set[str], whole: bool = False) -> str | None:
    """The first clause of ``text``'s statements that does not restate the ``effect`` (the
    question's words) and has three words at least ("guilty, sorry, I was on a deadline" -> "I
    was on a deadline"); ``whole``: the sentence holding it. A line is a sentence of its own (a
    heading "START TIME CHANGE" above the notice)."""
    for sentence in (line for x in statements(text) for line in x.split("\n") if line.strip()):
        if _ANNOUNCES.match(sentence):
            continue
        # "The council only approved the closure until 11:00, so the race will now start at 9:15":
        # what comes before "so" is the reason, whatever words the effect after it shares
        cause = _SO.split(sentence, maxsplit=1)
        if len(cause) > 1 and len(re.findall(r"[A-Za-z]{2,}", nearest := clauses(cause[0])[-1])) >= 3:
            # the clause right before "so", whatever words it shares with the effect ("the skip's
            # going right in front of the main gate so let's meet at the side gate")
            return sentence.strip().rstrip(".") if whole else nearest
        for clause in clauses(sentence):
            if len(re.findall(r"[A-Za-z]{2,}", clause)) >= 3 and not word_stems(clause) & effect:
                return sentence.strip().rstrip(".") if whole else clause
    return None


def when(chat: ChatIndex, said: list[Said], about: set[str], question: str):
    """A plan's day as written ("Thursday at 2pm"): from the later message that changes the best
    evidence message's plan, or, for a question about what is to come ("When is ..."), from that
    message itself (a weekday there is the one to come, not the one before); the new day is the
    last one a changing message names ("can't do Wednesday, he's coming Thursday at 2pm instead")."""
    first = next((s for s in said if s.role == "evidence" and word_stems(chat.raw_texts[s.row]) & about), None)
    if first is None:
        return None
    if asks(chat.raw_texts[first.row]) and not PLAN.search(chat.raw_texts[first.row]):
        # "When do the old keys have to go back?" is answered by its reply ("by noon on Monday the
        # 27th"), never by the day it was asked on
        for r in replies(chat, first.row):
            if not asks(chat.raw_texts[r]) and (days := list(PLAN.finditer(chat.raw_texts[r]))):
                return days[-1].group(0).strip(), [r, first.row], "phrase", chat.raw_texts[r]
    changes = later_changes(
        chat, first.row, about | content_stems(chat.raw_texts[first.row]), lambda t: bool(PLAN.search(t)), PLAN
    )
    if changes:
        row = changes[-1]
    elif re.match(r"\W*when\s+(?:is|are|will|does|do)\b", question, re.I) and any(
        TIME.search(m.group(0)) for m in PLAN.finditer(chat.raw_texts[first.row])
    ):
        row = first.row  # a day with its time ("Wednesday at 11"); a day alone is read as a date as before
    else:
        return None
    days = kept(list(PLAN.finditer(chat.raw_texts[row])), chat.raw_texts[row])
    phrase = ([m for m in days if TIME.search(m.group(0))] or days)[-1].group(0).strip()
    return phrase, [row, first.row] if row != first.row else [row], "phrase", chat.raw_texts[row]


def yes_no(chat: ChatIndex, said: list[Said], about: set[str], question: str):
    """Yes or no with the message that says it, quoted: of the statements about the question
    (by the person it names first, most shared words, then the latest: an outcome follows the
    plan), "no" where it is negated ("I'll miss this one"), or where the question names a day
    that a later message changed ("Was the release on 21 April?" after "moving the release to
    Thursday 23 April")."""
    named = query_names.persons(question, chat.speaker_names, chat.aliases)  # "Dev" names "Dev Nair"
    candidates = [
        s
        for s in said
        if s.role != "before"
        and statements(chat.raw_texts[s.row])
        and word_stems(" ".join(statements(chat.raw_texts[s.row]))) & about
    ]
    if not candidates:
        return None

    def by_them(s: Said) -> bool:
        text = chat.raw_texts[s.row]
        return chat.speakers[s.row] in named or bool(set(query_names.persons(text, named, chat.aliases)) & set(named))

    def rank(s: Said):
        return (by_them(s), len(word_stems(chat.raw_texts[s.row]) & about), chat.positions[s.row])

    best = max(candidates, key=rank)
    asked_day = PLAN.search(question)
    if asked_day:
        changed = later_changes(
            chat, best.row, about | content_stems(chat.raw_texts[best.row]), lambda t: bool(PLAN.search(t))
        )
        if changed and asked_day.group(0).lower() not in chat.raw_texts[changed[-1]].lower():
            return _quoted("No", chat, changed[-1]), [changed[-1], best.row], "yes_no", chat.raw_texts[changed[-1]]
    statement = max(statements(chat.raw_texts[best.row]), key=lambda x: len(word_stems(x) & about))
    if STILL.search(question) and chat.speakers[best.row] in named:
        # "Is Sam still helping?" by Sam: "Sorry, I'm out. My sister's wedding moved": the withdrawal
        # is the verdict wherever it stands in the message, the rest is the reason.
        statement = chat.raw_texts[best.row]
    return (
        _quoted("No" if NEGATIVE.search(statement) else "Yes", chat, best.row),
        [best.row],
        "yes_no",
        chat.raw_texts[best.row],
    )


# A yes/no question as put to a chat ("Does anyone know if ...", "Is the van coming?"), not "Why
# are we not ...?" (whose premise says it); a reply that gives a verdict ("Yes full £150 back",
# "Dave confirmed yesterday!")
_YES_NO_ASKED = re.compile(
    r"^\W*(?:(?:does|do) (?:anyone|anybody) know (?:if|whether)|does|do|did|is|are|was|were|can|could|will|has|have)\b",
    re.I,
)
_VERDICT = re.compile(r"^\W*(?:yes|yeah|yep|yup|no|nope|nah)\b|\bconfirm(?:s|ed)?\b", re.I)


def asked_unanswered(chat: ChatIndex, said: list[Said], about: set[str]) -> int | None:
    """The row of an evidence message putting the yes/no question to the chat ("Does anyone know
    if the car park takes cards?") that nobody answered: no reply gives a verdict and no later
    message of another person has the question's rarest words in the chat ("cards", "urn",
    "permit": what is asked, where the place asked about is named in other messages too); None
    when answered, or when nothing asks it."""
    counts = _stem_counts(chat)
    for s in said:
        text = chat.raw_texts[s.row]
        asking = [x for x in sentences(text) if asks(x) and _YES_NO_ASKED.match(x)]
        if s.role != "evidence" or not asking:
            continue
        asked = {w for x in asking for w in word_stems(x)}
        shared = about & asked
        if len(shared) < 2:
            continue
        fewest = min(counts.get(w, 0) for w in shared)
        rare = {w for w in shared if counts.get(w, 0) == fewest}
        verdict = any(_VERDICT.search(chat.raw_texts[r]) for r in replies(chat, s.row))
        spoken_of = any(
            chat.speakers[r] != chat.speakers[s.row] and word_stems(" ".join(statements(chat.raw_texts[r]))) & rare
            for r in range(s.row + 1, chat.size)
        )
        return None if verdict or spoken_of else s.row
    return None


@per_chat
def _stem_counts(chat: ChatIndex) -> dict[str, int]:
    """In how many messages of the chat each word stem is."""
    return Counter(w for t in chat.raw_texts for w in word_stems(t))


def _quoted(verdict: str, chat: ChatIndex, row: int) -> str:
    """The verdict; the message that says it is the claim's (cited, first in the evidence)."""
    return verdict


def came_from(chat: ChatIndex, said: list[Said], about: set[str], question: str):
    """Where a thing came from: the statement saying "from ..." in the best message about it or
    in what its writer said next ("I'm building two raised beds" -> "My neighbour Mr. Okafor
    has a pile of spare larch boards from his shed repair ..."), quoted whole."""
    for s in said:
        if s.role not in ("evidence", "after"):
            continue
        if s.role == "evidence" and not word_stems(chat.raw_texts[s.row]) & about:
            continue
        for sentence in statements(chat.raw_texts[s.row]):
            if re.search(r"\bfrom\s+(?!\d)", sentence, re.I):
                return sentence.strip(), [s.row, s.of] if s.row != s.of else [s.row], "phrase", chat.raw_texts[s.row]
    return None
