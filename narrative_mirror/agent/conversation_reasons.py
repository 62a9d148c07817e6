"""The conversation's readers of reasons, plans and verdicts (agent/conversation.py dispatches to
them): why (the reason clause, the reply that explains, the writer's message before), when (the
later message that moves a plan), yes/no (the statement that says it, a plan changed since) and
where from (the statement saying "from ...")."""

from __future__ import annotations

import re

from narrative_mirror.agent.exchange_values import NEGATIVE, PLAN, TIME
from narrative_mirror.agent.exchanges import (
    PROPOSES,
    Said,
    asks,
    clauses,
    content_stems,
    later_changes,
    replies,
    statements,
    word_stems,
)
from narrative_mirror.retrieval.chat_index import ChatIndex

_CAUSE = re.compile(r"\b(?:because|since|due to|given|as a result of|'cause|cos)\b\s*(.+)", re.I)


def why(chat: ChatIndex, said: list[Said], about: set[str], question: str):
    """The reason, from the messages sharing most of the question's words: a clause after a
    causal word ("given the migration delay"); for a message asking about the thing, its reply
    ("Is anyone using the bike?" -> "It's my cousin's, he left it ..."); for one telling the
    thing, the reply that explains it (shares its words, adds its own); else the message's clause
    that does not restate the question ("Can't Thursday, I have parent-teacher night"); else its
    writer's message before ("my sister's graduation got moved" before "Can we move it?")."""
    ranked = sorted(
        (s for s in said if s.role == "evidence" and word_stems(chat.raw_texts[s.row]) & about),
        key=lambda s: -len(word_stems(chat.raw_texts[s.row]) & about),
    )
    for s in ranked:
        text = chat.raw_texts[s.row]
        if (m := _CAUSE.search(text)) and not text[m.start() :].rstrip().endswith("?"):
            return clauses(m.group(0))[0], [s.row], "phrase", text
        answers = [r for r in replies(chat, s.row) if not asks(chat.raw_texts[r])]
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


def _reason(text: str, effect: set[str], whole: bool = False) -> str | None:
    """The first clause of ``text``'s statements that does not restate the ``effect`` (the
    question's words) and has three words at least ("guilty, sorry, I was on a deadline" -> "I
    was on a deadline"); ``whole``: the sentence holding it."""
    for sentence in statements(text):
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
    changes = later_changes(
        chat, first.row, about | content_stems(chat.raw_texts[first.row]), lambda t: bool(PLAN.search(t))
    )
    if changes:
        row = changes[-1]
    elif re.match(r"\W*when\s+(?:is|are|will|does|do)\b", question, re.I) and any(
        TIME.search(m.group(0)) for m in PLAN.finditer(chat.raw_texts[first.row])
    ):
        row = first.row  # a day with its time ("Wednesday at 11"); a day alone is read as a date as before
    else:
        return None
    days = list(PLAN.finditer(chat.raw_texts[row]))
    phrase = ([m for m in days if TIME.search(m.group(0))] or days)[-1].group(0).strip()
    return phrase, [row, first.row] if row != first.row else [row], "phrase", chat.raw_texts[row]


def yes_no(chat: ChatIndex, said: list[Said], about: set[str], question: str):
    """Yes or no with the message that says it, quoted: of the statements about the question
    (by the person it names first, most shared words, then the latest: an outcome follows the
    plan), "no" where it is negated ("I'll miss this one"), or where the question names a day
    that a later message changed ("Was the release on 21 April?" after "moving the release to
    Thursday 23 April")."""
    named = [s for s in chat.speaker_names if re.search(rf"\b{re.escape(s)}\b", question)]
    candidates = [
        s
        for s in said
        if s.role != "before"
        and statements(chat.raw_texts[s.row])
        and word_stems(" ".join(statements(chat.raw_texts[s.row]))) & about
    ]
    if not candidates:
        return None

    def rank(s: Said):
        text = chat.raw_texts[s.row]
        by_them = chat.speakers[s.row] in named or any(re.search(rf"\b{re.escape(n)}\b", text) for n in named)
        return (by_them, len(word_stems(text) & about), chat.positions[s.row])

    best = max(candidates, key=rank)
    asked_day = PLAN.search(question)
    if asked_day:
        changed = later_changes(
            chat, best.row, about | content_stems(chat.raw_texts[best.row]), lambda t: bool(PLAN.search(t))
        )
        if changed and asked_day.group(0).lower() not in chat.raw_texts[changed[-1]].lower():
            return _quoted("No", chat, changed[-1]), [changed[-1], best.row], "yes_no", chat.raw_texts[changed[-1]]
    statement = max(statements(chat.raw_texts[best.row]), key=lambda x: len(word_stems(x) & about))
    return (
        _quoted("No" if NEGATIVE.search(statement) else "Yes", chat, best.row),
        [best.row],
        "yes_no",
        chat.raw_texts[best.row],
    )


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
