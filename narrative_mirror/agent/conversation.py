"""Answers read from the conversation around the evidence, not from single messages (offline).

A chat answers in exchanges: "Who's bringing the ball?" is answered by the reply "I'll bring
mine", a plan is changed by a later message ("he's coming Thursday at 2pm instead"), a price is
a total and a share. So for the best evidence messages this reads their replies (reply links
where the chat has them, else the next messages of the others in the same session), the
writer's message before, and the later messages that change what they said; then it fills the
question's slot with a typed value:

- who: the writer of a message that does the act in the first person ("I'll bring mine", "Fixed
  in PR #482"), or the person a message names as doing it ("Dr Okafor swapped with me"); a
  person someone only addresses ("@Felix can you verify?") or a place is never the answer;
- what time: a clock time ("3pm", "at 10"), from the latest message that gives one;
- how much / how many: an amount, not a count of things ("14 pizzas, came to 238"); "each"
  asked, a share ("62 each"), else a total split by the people counted ("250 split 6 ways");
- why: the reason clause, from a causal word ("given the migration delay"), the reply to a
  question about the thing, the message's other sentence, or the writer's message before;
- when: a later message that moves the plan ("instead", "moved to", "what about ...") answers
  instead of the one it changes;
- where: a person's home given as the place ("I can host at mine": at the writer's place).

``answer`` returns None when the question is not of these kinds or nothing fits: the
single-message answer (answer.offline_answer) runs then.
"""

from __future__ import annotations

import re

from narrative_mirror.agent import answer as answer_mod
from narrative_mirror.agent import conversation_reasons, countries, people
from narrative_mirror.agent.exchange_values import (
    COUNT_OF_PEOPLE,
    EACH_AFTER,
    NEGATIVE,
    NUMBER,
    NUMBER_WORDS,
    amounts,
    times_in,
)
from narrative_mirror.agent.exchanges import (
    ASKS,
    COMMON_WORDS,
    Said,
    asks,
    context,
    correction_of,
    flagged_rows,
    later_changes,
    replies,
    said_in_other_words,
    statements,
    topic_stems,
    unmentioned,
    word_stem,
    word_stems,
)
from narrative_mirror.agent.planner import reply_question
from narrative_mirror.agent.slots import home_place, offered_answers, sentences
from narrative_mirror.agent.text import MONTHS, WEEKDAYS
from narrative_mirror.layers.text import STOPWORDS
from narrative_mirror.retrieval import query_names
from narrative_mirror.retrieval.chat_index import ChatIndex

# The writer alone; "we can borrow 6 tables" says the group will, not who does it
_I = r"i|i'm|i'll|i've|i'd|me|mine|my"
_THE_WRITER = re.compile(rf"\b(?:{_I})\b", re.I)
_FIRST_PERSON = re.compile(rf"\b(?:{_I}|we|we'll|we're)\b", re.I)
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
    "dr",
    "mr",
    "mrs",
    "ms",
}
_CALENDAR = set(WEEKDAYS) | {w + "s" for w in WEEKDAYS} | {m.lower() for m in MONTHS}
_ADDRESSED = re.compile(r"^\s*,?\s*(?:can|could|would|will|do|did|are|please)\s+you\b", re.I)
_TAKES_IT_ON = re.compile(r"^\W*(?:i['’]ll|i will|i can|i['’]m on it|me\b|leave it (?:with|to) me)", re.I)
_PLACE_BEFORE = re.compile(r"\b(?:in|at|on|from|to|near|into|outside|inside|via)\s+$", re.I)


def question_kind(question: str, intent: str) -> str | None:
    """The kinds read from the conversation: who, time, each, amount, count, why, when; else None."""
    q = question.lower()
    if intent == "who" and re.match(r"\W*who\b", q):
        return "who"
    if re.search(r"\bwhat time\b", q):
        return "time"
    if intent == "how_many" and re.search(r"\bhow much\b", q) or re.search(r"\b(?:cost|price|budget|charge)\b", q):
        return "each" if re.search(r"\b(?:each|per|a head|everyone)\b", q) else "amount"
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
    if kind != "why" and not _ASKS_REPLACEMENT.search(run.question) and (never := unmentioned(run.question, chat)):
        read = [chat.texts[s.row] for s in said]
        never = [w for w in never if not said_in_other_words(w, read, run.retriever.embedder.encode)]
        if never:
            note = f"No message of this chat mentions: {', '.join(never)}"
            return answer_mod.NO_ANSWER, [], [note], []
    if kind is None or not rows:
        return None
    about = topic_stems(run.question, chat)
    found = READERS[kind](chat, said, about, run.question)
    if found is None:
        return None
    text, cited, claim_kind, sentence = found
    cited = cited if isinstance(cited, list) else [cited]
    claim = answer_mod.Claim(
        text, [chat.local_ids[r] for r in cited], kind=claim_kind, sentence=sentence, exchange=True
    )
    return text, [claim], [], cited


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
}


def _act(question: str) -> set[str]:
    """Stems of the verb of a who-question ("Who fixed ..." -> fix, "Who gave ..." -> give, gave)."""
    m = re.match(r"\W*who\s+(?:(?:is|was|will|would|can|could|has|had|did|does|'s)\s+)?([a-z]+)", question.lower())
    if not m or m.group(1) in STOPWORDS:
        return set()
    word = m.group(1)
    return {word_stem(word), word, *([word_stem(_IRREGULAR[word]), _IRREGULAR[word]] if word in _IRREGULAR else [])}


def _who(chat: ChatIndex, said: list[Said], about: set[str], question: str):
    """The person doing what the question asks (its verb, or only its object when no message has
    the verb): the person a statement names before the verb, or its writer speaking of
    themselves ("I'll fix it today", "Fixed in PR #482"); for a message asking it, its reply's
    writer or the person the reply names ("That was Sofia's friend Jonas")."""
    speakers = {s.lower(): s for s in chat.speaker_names}
    if _ASKS_REPLACEMENT.search(question) and (found := _replacement(chat, question, speakers)):
        return found
    act = _act(question)
    found = _doer(chat, said, about, act, speakers)
    # "Who helped Mara ...?" asks for someone other than Mara
    if found and not re.search(rf"\b{re.escape(found[0])}\b", question.split(None, 1)[-1]):
        return found
    return None


# "Who's coming instead of Laura?", "Who took Ellie's place?", "Who stood in on drums?"
_ASKS_REPLACEMENT = re.compile(
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
                or name.lower() in _CALENDAR
                or re.search(r"(?:^|[.!?]\s*)$", before)
                and not query_names.persons(name, chat.speaker_names, chat.aliases)
                or re.match(r"^['’]s\s+(?:place|spot)", text[m.end() :])
            ):
                continue
            # cited with the message of the one replaced dropping out: the answer rests on both
            return speakers.get(name.lower(), name), [row, start] if replaced and start != row else [row], "name", text
    return None


def _doer(chat: ChatIndex, said: list[Said], about: set[str], act: set[str], speakers: dict[str, str]):
    thing = about - act
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
        for sentence in statements(text):
            words = word_stems(sentence)
            if not words & wanted or (also and not words & also) or asks(sentence):
                continue
            if name := _named(sentence, speakers, wanted):
                return name, [item.row], "name", text
            opening = re.match(r"^\W*([A-Za-z]+)", sentence)
            elliptic = (
                wanted is act
                and opening
                and opening.group(1)[0].isupper()
                and word_stem(opening.group(1).lower()) in act
            )
            if _THE_WRITER.search(sentence) or elliptic:  # "Found a nasty bug": its writer found it
                return chat.speakers[item.row], [item.row], "author", text
    return None


def _answered_doer(chat, said, wanted, also, speakers):
    """For an evidence message asking about ``wanted`` (and ``also``): its reply's writer taking
    it on, or the person the reply names."""
    for item in said:
        text = chat.raw_texts[item.row]
        asked = [
            x for x in sentences(text) if asks(x) and word_stems(x) & wanted and (not also or word_stems(x) & also)
        ]
        if not asked or item.role != "evidence":
            continue
        for reply in replies(chat, item.row):
            answer_text = chat.raw_texts[reply]
            if asks(answer_text):
                continue
            # "I'll do it, I've used Castle Rock Hostel before": its writer takes it on; the
            # names after that are what they speak of
            if _TAKES_IT_ON.match(answer_text):
                return chat.speakers[reply], [reply, item.row], "author", answer_text
            if name := _named(answer_text, speakers, wanted, anywhere=True):
                if name != chat.speakers[item.row]:
                    return name, [reply, item.row], "name", answer_text
            if _FIRST_PERSON.search(answer_text) or re.match(r"^\W*(?:yes|yep|sure|me)\b", answer_text, re.I):
                return chat.speakers[reply], [reply, item.row], "author", answer_text
    return None


def _named(text: str, speakers: dict[str, str], about: set[str], anywhere: bool = False) -> str | None:
    """A person the text names as doing the act: a name before a word of the act (or anywhere in a
    reply), not someone addressed ("@Felix can you ..."), not owning something ("Sofia's
    friend"), not a place ("on Deansgate")."""
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
            if first in ("dr", "mr", "mrs", "ms") and len(name.split()) > 1:
                name = name  # a title and a name: the name with its title
            else:
                continue
        if m.start() == 0 or re.search(r"[.!?]\s*$", before):  # a sentence's first word: only a known speaker
            if first not in speakers and first not in ("dr", "mr", "mrs", "ms"):
                continue
        at_start = m.start() == 0 or bool(re.search(r"[.!?]\s*$", before))
        if re.match(r"^['’]s\b", after) or _ADDRESSED.match(after) or (at_start and after.lstrip().startswith(",")):
            continue
        if not anywhere and m.start() > act_at:
            continue
        names.append(speakers.get(first, name))
    return names[-1] if names else None


def _time(chat: ChatIndex, said: list[Said], about: set[str], question: str):
    """A clock time: of the messages giving one, those sharing most of the question's words, the
    latest of them (a later time changes the plan); the time nearest those words."""
    candidates = [
        s.row for s in said if times_in(chat.raw_texts[s.row]) and not chat.raw_texts[s.row].rstrip().endswith("?")
    ]
    for s in said:
        if s.role == "evidence":
            candidates += later_changes(chat, s.row, about, lambda t: bool(times_in(t)))
    if not candidates:
        return None
    row = max(set(candidates), key=lambda r: (len(word_stems(chat.raw_texts[r]) & about), chat.positions[r]))
    row = correction_of(chat, row, lambda t: bool(times_in(t)))
    text = chat.raw_texts[row]
    words = [m.start() for m in re.finditer(r"[A-Za-z'-]+", text) if word_stem(m.group().lower()) in about] or [0]
    best = min(times_in(text), key=lambda m: min(abs(m.start() - w) for w in words))
    return ("at " if best.group("bare") else "") + best.group(0).strip(), row, "phrase", text


def _amount(chat: ChatIndex, said: list[Said], about: set[str], question: str, each: bool = False):
    """An amount from the messages about the question (most shared words, then the latest); a
    share per person when "each" is asked: written as one ("62 each", "everyone owes me £12";
    the latest said in the same session on the same numbers or words), else the total split by
    the people counted in the same message ("250 split 6 ways")."""

    def cited(s: Said) -> list[int]:
        return [s.row, s.of] if s.row != s.of else [s.row]

    # What is paid for, the people the question names aside: "How much did Chris pay for his
    # boots?" is not answered by a message about Chris that names no boots.
    names = {word_stem(w.lower()) for w in re.findall(r"(?<=\s)[A-Z][a-z]+", question)}
    paid_for = about - names or about
    typed = [s for s in said if amounts(chat.raw_texts[s.row]) and not chat.raw_texts[s.row].rstrip().endswith("?")]
    relevant = [s for s in typed if (word_stems(chat.raw_texts[s.row]) | word_stems(chat.raw_texts[s.of])) & paid_for]
    if not relevant:
        return None
    ranked = sorted(relevant, key=lambda s: (-len(word_stems(chat.raw_texts[s.row]) & about), -chat.positions[s.row]))
    if each:
        spoken = about | set().union(*(word_stems(chat.raw_texts[s.row]) for s in said)) - COMMON_WORDS
        for s in ranked:
            text = chat.raw_texts[s.row]
            if [a for a in amounts(text) if _a_share(text, a)]:
                row = _latest_share(chat, s.row, spoken)
                shares = [a for a in amounts(chat.raw_texts[row]) if _a_share(chat.raw_texts[row], a)]
                written, after = shares[-1][1], shares[-1][2]
                each_words = EACH_AFTER.match(after)
                return (
                    f"{written} {' '.join(each_words.group(0).split())}" if each_words else written,
                    [row, *cited(s)][:2] if row != s.row else cited(s),
                    "phrase",
                    chat.raw_texts[row],
                )
            people = COUNT_OF_PEOPLE.search(text)
            if people and (written := amounts(text)):
                n = people.group(1) or people.group(2)
                count = int(n) if n.isdigit() else NUMBER_WORDS[n.lower()]
                total = max(a[0] for a in written)
                return f"about {total / count:.0f} each ({total:g} split {count} ways)", cited(s), "split", text
    s = ranked[0]
    text = chat.raw_texts[s.row]
    written = amounts(text)
    total = [a for a in written if re.match(r"^\s*total", a[2], re.I)]
    chosen = (total or written)[0]
    return chosen[1] + (" each" if EACH_AFTER.match(chosen[2]) else " total" if total else ""), cited(s), "phrase", text


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


def _home(chat: ChatIndex, said: list[Said], about: set[str], question: str):
    """A where-question answered with a person's home ("Book club this Thursday, who's hosting?"
    answered by Omar's "I can host at mine": at Omar's place), from a message about the
    question's topic: the best evidence message or a reply to an evidence message asking
    something; None when neither names a home (a place in the other messages is read then)."""
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


READERS = {
    "who": _who,
    "time": _time,
    "each": lambda *a: _amount(*a, each=True),
    "amount": _amount,
    "count": _count,
    "why": conversation_reasons.why,
    "when": conversation_reasons.when,
    "yes_no": conversation_reasons.yes_no,
    "from": conversation_reasons.came_from,
    "where": _home,
}
