"""Answers read from the conversation around the evidence, not from single messages (offline).

A chat answers in exchanges: "Who's bringing the ball?" is answered by the reply "I'll bring
mine", a plan is changed by a later message ("he's coming Thursday at 2pm instead"), a price is
a total and a share. So for the best evidence messages this reads their replies (reply links
where the chat has them, else the next messages of the others in the same session), the
writer's message before, and the later messages that change what they said; then it fills the
question's slot with a typed value:

- who: the person doing it, from the message saying so or the reply to one asking it
  (agent/doers.py);
- what time: a clock time ("3pm", "at 10"), from the latest message that gives one;
- how much / how many: an amount, not a count of things ("14 pizzas, came to 238"); "each"
  asked, a share ("62 each"), else a total split by the people counted ("250 split 6 ways");
- why: the reason clause, from a causal word ("given the migration delay"), the reply to a
  question about the thing, the message's other sentence, or the writer's message before;
- when: a later message that moves the plan ("instead", "moved to", "what about ...") answers
  instead of the one it changes;
- where: a person's home given as the place ("I can host at mine": at the writer's place), the
  place a reply names or a later message moves it to (agent/places.py).

``answer`` returns None when the question is not of these kinds or nothing fits: the
single-message answer (answer.offline_answer) runs then.
"""

from __future__ import annotations

import re

from narrative_mirror.agent import answer as answer_mod
from narrative_mirror.agent import conversation_reasons, doers, people, places
from narrative_mirror.agent.exchange_values import (
    COUNT_OF_PEOPLE,
    EACH_AFTER,
    MONEY_AFTER,
    NUMBER,
    NUMBER_WORDS,
    TIME,
    amounts,
    kept,
    times_in,
)
from narrative_mirror.agent.exchanges import (
    ASKS,
    COMMON_WORDS,
    Said,
    content_stems,
    context,
    correction_of,
    flagged_rows,
    later_changes,
    per_chat,
    said_in_other_words,
    topic_stems,
    unmentioned,
    word_stem,
    word_stems,
)
from narrative_mirror.agent.planner import reply_question
from narrative_mirror.agent.slots import offered_answers
from narrative_mirror.layers.text import STOPWORDS
from narrative_mirror.retrieval import query_names
from narrative_mirror.retrieval.chat_index import ChatIndex

# One person's part of a cost: "each", "per head", or what the asker or several people owe or pay
# ("How much do I owe Priya?", "What do Sofia and Rhys owe Ify?")
ASKS_A_SHARE = re.compile(
    r"\b(?:each|per|a head|everyone|my share|(?:i|we|\w+ and \w+) owe|(?:do|should|shall) (?:i|we) (?:pay|send))\b"
)


def question_kind(question: str, intent: str) -> str | None:
    """The kinds read from the conversation: who, time, each, amount, count, why, when; else None."""
    q = question.lower()
    if intent == "who" and re.match(r"\W*who\b", q):
        return "who"
    if re.search(r"\bwhat time\b", q):
        return "time"
    if (
        intent == "how_many"
        and re.search(r"\bhow much\b", q)
        or re.search(r"\b(?:cost|price|budget|charge|owes?)\b", q)
    ):
        return "each" if ASKS_A_SHARE.search(q) else "amount"
    if re.search(r"\bhow many\b", q) and not re.search(r"\btimes\b", q):
        return "count"
    if intent == "why":
        return "why"
    if intent == "where" and re.search(r"\b(?:come|came|comes) from\b", q):
        return "from"
    if intent == "where":
        return "where"
    if intent == "when":
        return "when"
    if intent == "yes_no" and not offered_answers(question):  # "full-time or part-time?" is not answered by "Yes"
        return "yes_no"
    return None


def reads_first(question: str, intent: str) -> bool:
    """Whether this reader answers before the authors' reader (agent/people.py): a who-question
    not about replies ("Who is bringing the ball?" is answered by the reply "I'll bring mine",
    not by the author of the best matching message)."""
    return (
        question_kind(question, intent) == "who"
        and not reply_question(question)
        and people.author_question(question) != "saying"
    )


def answer(run, evidence: list[answer_mod.EvidenceMessage]):
    """(answer, claims, unknowns, added evidence) read from the conversation; None when the
    question is not of a kind read here or nothing fits."""
    chat = run.retriever.chat(run.chat_file)
    flagged = flagged_rows(chat)
    rows = [
        chat.row_of[e.message.local_id]
        for e in evidence
        if e.message.local_id in chat.row_of and not e.reply_to and chat.row_of[e.message.local_id] not in flagged
    ]
    said = context(chat, rows)
    kind = question_kind(run.question, run.facets.intent)
    # A why-question's last words are the event's ("fall through", "leave so early"), not a thing
    # the chat has to name: it is answered, or not, by the reason reader.
    # ... nor is "place" in "Who took Ellie's place?": the person is asked, the place is a relation
    if kind != "why" and not doers.ASKS_REPLACEMENT.search(run.question) and (never := unmentioned(run.question, chat)):
        read = [chat.texts[s.row] for s in said]
        never = [w for w in never if not said_in_other_words(w, read, run.retriever.embedder.encode)]
        if never:
            note = f"No message of this chat mentions: {', '.join(never)}"
            return answer_mod.NO_ANSWER, [], [note], []
    if kind is None or not rows:
        return None
    about = topic_stems(run.question, chat)
    # a yes/no question the chat asked and left unanswered is not answered by the asking message
    if kind == "yes_no" and (row := conversation_reasons.asked_unanswered(chat, said, about)) is not None:
        note = f"{chat.speakers[row]} asked this on {chat.timestamps[row]:%d %b %Y}; no one in the chat answered it"
        return answer_mod.NO_ANSWER, [], [note], [row]
    found = READERS[kind](chat, said, about, run.question)
    if found is None:
        return None
    text, cited, claim_kind, sentence = found
    cited = cited if isinstance(cited, list) else [cited]
    claim = answer_mod.Claim(
        text, [chat.local_ids[r] for r in cited], kind=claim_kind, sentence=sentence, exchange=True
    )
    return text, [claim], [], cited


def _time(chat: ChatIndex, said: list[Said], about: set[str], question: str):
    """A clock time: of the messages giving one, those sharing most of the question's words, the
    latest of them (a later time changes the plan); the time nearest those words."""
    candidates = [
        s.row for s in said if times_in(chat.raw_texts[s.row]) and not chat.raw_texts[s.row].rstrip().endswith("?")
    ]
    for s in said:
        if s.role == "evidence":
            candidates += later_changes(chat, s.row, about, lambda t: bool(times_in(t)), TIME)
    if not candidates:
        return None
    row = max(set(candidates), key=lambda r: (len(word_stems(chat.raw_texts[r]) & about), chat.positions[r]))
    # a later message moving that plan, in its own words ("they've moved our masterclass to 2pm"
    # after "a cocktail masterclass at Copper & Lime, 4pm")
    if moved := later_changes(chat, row, about | content_stems(chat.raw_texts[row]), lambda t: bool(times_in(t)), TIME):
        row = moved[-1]
    row = correction_of(chat, row, lambda t: bool(times_in(t)))
    text = chat.raw_texts[row]
    words = [m.start() for m in re.finditer(r"[A-Za-z'-]+", text) if word_stem(m.group().lower()) in about] or [0]
    best = min(kept(times_in(text), text), key=lambda m: min(abs(m.start() - w) for w in words))
    return ("at " if best.group("bare") else "") + best.group(0).strip(), row, "phrase", text


def _amount(chat: ChatIndex, said: list[Said], about: set[str], question: str, each: bool = False):
    """An amount from the messages about the question (most shared words, then the latest); a
    share per person when "each" is asked: written as one ("62 each", "everyone owes me £12";
    the latest said in the same session on the same numbers or words), else the total split by
    the people counted in the same message ("250 split 6 ways")."""

    def cited(s: Said) -> list[int]:
        return [s.row, s.of] if s.row != s.of else [s.row]

    # A chat that writes its prices with a currency sign: a bare number is no price ("keys at 5",
    # "12 S, 10 M, 8 L"), unless a money word goes with it ("30 quid", "6 each")
    priced = _prices_with_a_sign(chat)

    def prices(text: str) -> list[tuple[float, str, str]]:
        return [a for a in amounts(text) if not priced or a[1][0] in "£$€" or MONEY_AFTER.match(a[2])]

    # What is paid for, the people the question names aside: "How much did Chris pay for his
    # boots?" is not answered by a message about Chris that names no boots.
    names = {word_stem(w.lower()) for w in re.findall(r"(?<=\s)[A-Z][a-z]+", question)}
    paid_for = about - names or about
    typed = [s for s in said if prices(chat.raw_texts[s.row]) and not chat.raw_texts[s.row].rstrip().endswith("?")]
    relevant = [s for s in typed if (word_stems(chat.raw_texts[s.row]) | word_stems(chat.raw_texts[s.of])) & paid_for]
    # No share of the thing in the evidence: the latest one the chat gives for it, or posted by
    # the person the question says is owed ("How much do I owe Priya for the skip?")
    owed = set(query_names.persons(question, chat.speaker_names, chat.aliases))

    def a_share_of_it(row: int) -> bool:
        text = chat.raw_texts[row]
        about_it = chat.speakers[row] in owed or word_stems(text) & paid_for
        return bool(about_it) and any(_a_share(text, a) for a in prices(text)) and row not in flagged_rows(chat)

    if each and not any(a_share_of_it(s.row) for s in relevant):
        shares = [r for r in range(chat.size) if a_share_of_it(r)]
        if shares:
            best = max(
                shares, key=lambda r: (chat.speakers[r] in owed, bool(word_stems(chat.raw_texts[r]) & paid_for), r)
            )
            relevant = [Said(best, "evidence", best)]
    if not relevant:
        return None
    ranked = sorted(relevant, key=lambda s: (-len(word_stems(chat.raw_texts[s.row]) & about), -chat.positions[s.row]))
    if each:
        spoken = about | set().union(*(word_stems(chat.raw_texts[s.row]) for s in said)) - COMMON_WORDS
        for s in ranked:
            text = chat.raw_texts[s.row]
            if [a for a in prices(text) if _a_share(text, a)]:
                later = _latest_share(chat, s.row, spoken)
                # a later share by its writer, or about the thing; not another's split of the petrol
                corrects = chat.speakers[later] == chat.speakers[s.row] or a_share_of_it(later)
                row = later if corrects or not a_share_of_it(s.row) else s.row
                shares = [a for a in prices(chat.raw_texts[row]) if _a_share(chat.raw_texts[row], a)]
                written, after = shares[-1][1], shares[-1][2]
                each_words = EACH_AFTER.match(after)
                return (
                    f"{written} {' '.join(each_words.group(0).split())}" if each_words else written,
                    [row, *cited(s)][:2] if row != s.row else cited(s),
                    "phrase",
                    chat.raw_texts[row],
                )
            people = COUNT_OF_PEOPLE.search(text)
            if people and (written := prices(text)):
                n = people.group(1) or people.group(2)
                count = int(n) if n.isdigit() else NUMBER_WORDS[n.lower()]
                total = max(a[0] for a in written)
                return f"about {total / count:.0f} each ({total:g} split {count} ways)", cited(s), "split", text
    s = ranked[0]
    text = chat.raw_texts[s.row]
    written = prices(text)
    total = [a for a in written if re.match(r"^\s*total", a[2], re.I)]
    chosen = _next_to(text, written, question) or (total or written)[0]
    return chosen[1] + (" each" if EACH_AFTER.match(chosen[2]) else " total" if total else ""), cited(s), "phrase", text


# "How much was the deposit to hold it?": the thing priced (deposit); not "How much of the deposit
# ..." (a part of it) nor "How much did Noor pay" (a person)
_PRICED = re.compile(
    r"\bhow much (?:is|was|were|are|will|would)\s+(?:the|a|an|our|my|your)\s+([a-z][\w'-]*)(?:\s+([a-z][\w'-]*))?"
)


def _next_to(text: str, written: list[tuple[float, str, str]], question: str):
    """Of several amounts in a message, the one written with the thing the question prices ("£180
    for the evening, £60 deposit now" asked "How much was the deposit?": £60; "Hotel: €1,392 (the
    €200 deposit ...)": €200); None when the question prices no thing or no amount goes with it."""
    priced = _PRICED.search(question.lower())
    if len(written) < 2 or not priced:
        return None
    head, second = priced.groups()
    noun = word_stem(second if second and second not in STOPWORDS else head)
    position = 0
    for amount in written:
        position = text.find(amount[1], position) + len(amount[1])
        after = re.match(r"\s*([A-Za-z'-]+)", text[position:])
        # "deposit: £60", "deposit of £60", "urn hire £15"
        before = re.search(
            r"([A-Za-z'-]+)(?:\s+([A-Za-z'-]+))?\s*(?::|is|was|of)?\s*$", text[: position - len(amount[1])]
        )
        words = [after and after.group(1), *(before.groups() if before else ())]
        if any(w and word_stem(w.lower()) == noun for w in words):
            return amount
    return None


@per_chat
def _prices_with_a_sign(chat: ChatIndex) -> bool:
    """Whether the chat writes at least two prices with a currency sign."""
    return sum(bool(re.search(r"[£$€]\s?\d", t)) for t in chat.raw_texts) >= 2


_EACH_BEFORE = re.compile(r"\b(?:each|everyone|every one|per person)\b(?:\s+[a-z']+){0,3}\s*$", re.I)


def _before(text: str, amount: tuple[float, str, str]) -> str:
    return text[: len(text) - len(amount[2]) - len(amount[1])]


def _a_share(text: str, amount: tuple[float, str, str]) -> bool:
    """Whether the amount is one person's share: "62 each", "everyone owes me £12"."""
    return bool(EACH_AFTER.match(amount[2]) or _EACH_BEFORE.search(_before(text, amount)))


def _latest_share(chat: ChatIndex, row: int, spoken: set[str]) -> int:
    """The last message of ``row``'s session, from ``row`` on, giving a share per person that
    shares a word or number with what was said ("250 split 6 ways is about 42 each" after "If
    there's 5 of us that's 50 each"); ``row`` when none."""
    latest = row
    for r in range(row + 1, chat.size):
        if chat.sessions[r] != chat.sessions[row]:
            break
        if r in flagged_rows(chat):
            continue
        text = chat.raw_texts[r]
        if any(_a_share(text, a) for a in amounts(text)) and word_stems(text) & spoken:
            latest = r
    return latest


def _count(chat: ChatIndex, said: list[Said], about: set[str], question: str):
    """A count: the number written before the question's noun ("12,400 merchant accounts"), or
    the last number of a reply to a message asking it ("25 is a lot ..., let's say 20")."""
    for s in said:
        text = chat.raw_texts[s.row]
        for m in NUMBER.finditer(text):
            following = re.findall(r"[A-Za-z]+", text[m.end() :])[:2]
            if any(word_stem(w.lower()) in about for w in following):
                # with the question's words that follow it at once ("13 years", "12,400 merchant
                # accounts"), as a reader says it
                noun = re.match(r"(?:\s+[A-Za-z]+)+", text[m.end() :])
                words = noun.group(0).split()[:2] if noun else []
                while words and word_stem(words[-1].lower()) not in about:
                    words.pop()
                return " ".join([m.group(0).strip(), *words]), s.row, "phrase", text
        if s.role == "reply" and ASKS.search(chat.raw_texts[s.of]) and (numbers := list(NUMBER.finditer(text))):
            return numbers[-1].group(0).strip(), s.row, "phrase", text
    return None


READERS = {
    "who": doers.who,
    "time": _time,
    "each": lambda *a: _amount(*a, each=True),
    "amount": _amount,
    "count": _count,
    "why": conversation_reasons.why,
    "when": conversation_reasons.when,
    "yes_no": conversation_reasons.yes_no,
    "from": conversation_reasons.came_from,
    "where": places.where,
}
