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
  instead of the one it changes.

``answer`` returns None when the question is not of these kinds or nothing fits: the
single-message answer (answer.offline_answer) runs then.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from narrative_mirror.agent import answer as answer_mod
from narrative_mirror.agent import countries
from narrative_mirror.agent.dates import resolve_date
from narrative_mirror.agent.planner import reply_question
from narrative_mirror.agent.slots import sentences
from narrative_mirror.agent.text import stem, stems
from narrative_mirror.layers.text import STOPWORDS
from narrative_mirror.retrieval.chat_index import ChatIndex

LOOK_AT = 5  # the best this many evidence messages are read with their conversation
FOLLOWING = 3  # without reply links: this many next messages of the others answer a message
_FORM = {stem(w) for w in ("much", "many", "time", "cost", "costs", "pay", "paid", "price", "each", "person", "people",
                           "per", "total")}
_ASKS = re.compile(r"^\W*(?:who|what|when|where|why|how|which|is|are|was|were|do|does|did|has|have|will|would)\b|\?", re.I)
_PROPOSES = re.compile(r"\b(?:can|could|shall|should)\s+(?:we|someone|somebody|anyone|you)\b|\blet'?s\b|\bhow about\b|"
                       r"\bwhat about\b", re.I)
_CHANGE = re.compile(r"\b(?:instead|moved?|moving|changed?|postponed?|rescheduled?|pushed|what about|how about|"
                     r"(?:we're|we are|it's|it is) now|update)\b", re.I)
_AGREE = re.compile(r"\b(?:works|it is|fine|ok|okay|sure|yes|agreed|deal|sounds good|perfect)\b", re.I)
_CAUSE = re.compile(r"\b(?:because|since|due to|given|as a result of|'cause|cos)\b\s*(.+)", re.I)
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i'll|i've|i'd|we|we'll|we're|me|mine|my)\b", re.I)
_TIME = re.compile(r"\b(?:(?P<h>\d{1,2})(?::(?P<m>\d{2}))?\s*(?P<ampm>am|pm|a\.m\.|p\.m\.)"
                   r"|(?P<hm>\d{1,2}:\d{2})|(?<=\bat )(?P<bare>\d{1,2})(?![\d:.,]|\s*(?:%|each|people|of|th|st|nd|rd)))",
                   re.I)
_NUMBER = re.compile(r"(?<![\w#.,/-])[£$€]?\s?(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?![\w/]|[.,]\d|:\d|-\d)")
_MONEY_AFTER = re.compile(r"^\s*(?:quid|euros?|eur|pounds?|dollars?|bucks|gbp|usd|each|total|a head|per\b|pp\b|left|for the)",
                          re.I)
_EACH_AFTER = re.compile(r"^\s*(?:quid\s+|euros?\s+|pounds?\s+|dollars?\s+)?(?:each|a head|per (?:person|head|player)|pp)\b",
                         re.I)
_COUNT_OF_PEOPLE = re.compile(r"\b(?:split|divided)\s+(\d+|two|three|four|five|six|seven|eight|nine|ten)\s+ways\b|"
                              r"\b(\d+|two|three|four|five|six|seven|eight|nine|ten)\s+of\s+us\b", re.I)
_NUMBER_WORDS = {w: n for n, w in enumerate("zero one two three four five six seven eight nine ten".split())}
_NOT_NAMES = {"i", "ok", "okay", "yes", "no", "hey", "hi", "thanks", "the", "a", "great", "nice", "so", "and", "but",
              "dr", "mr", "mrs", "ms"}
_PLACE_BEFORE = re.compile(r"\b(?:in|at|on|from|to|near|into|outside|inside|via)\s+$", re.I)


@dataclass
class Said:
    row: int
    role: str  # "evidence", "reply" (answers an evidence message), "before" (its writer's message before), "later"
    of: int  # the evidence row it belongs to


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
    if intent == "when":
        return "when"
    return None


def reads_first(question: str, intent: str) -> bool:
    """Whether this reader answers before the authors' reader (agent/people.py): a who-question
    not about replies ("Who is bringing the ball?" is answered by the reply "I'll bring mine",
    not by the author of the best matching message)."""
    return question_kind(question, intent) == "who" and not reply_question(question)


def topic_stems(question: str, chat: ChatIndex) -> set[str]:
    """Stems of what the question is about: its content words, the speakers and its form aside."""
    return stems(question, exclude=[s.lower() for s in chat.speaker_names]) - _FORM - {"who", "what", "why", "when"}


_DETERMINER = {"the", "a", "an", "his", "her", "their", "my", "our", "its", "your", "any", "some"}
_TRAILING_SETTING = re.compile(r"\s+(?:at|on|in|with|during|after|before|from|to|into|for)\s+[^?]*\??$", re.I)


def unmentioned(question: str, chat: ChatIndex) -> list[str]:
    """The words naming what the question asks about that no message of the chat mentions (by
    stem): the nouns after a determiner ("the wifi password") and the question's last word
    ("Where did they go hiking?"), a setting it adds at its end aside ("at the cabin", "for the
    trip"). "What was the wifi password?" asks of something never said when no message says
    "wifi"; a verb said in other words ("Who gave Ivan a lift?") is not looked at."""
    core = _TRAILING_SETTING.sub("", question.strip()).rstrip(" ?")
    words = re.findall(r"[a-z0-9][a-z0-9'.-]*[a-z0-9]|[a-z0-9]", core.lower())
    people = {s.lower() for s in chat.speaker_names} | {w for s in chat.speaker_names for w in s.lower().split()}
    named: list[str] = []
    in_phrase = False
    for n, word in enumerate(words):
        if word in _DETERMINER:
            in_phrase = True
            continue
        verb = n + 1 < len(words) and words[n + 1] in _DETERMINER  # "fix the boiler": "fix" acts on the noun
        if in_phrase and word not in STOPWORDS and not verb:
            named.append(word)
        else:
            in_phrase = False
    if words and words[-1] not in STOPWORDS:
        named.append(words[-1])
    said = set().union(*(_stem_set(t) for t in chat.raw_texts))
    out = []
    for word in dict.fromkeys(named):
        w = stem(word)
        if word in people or w in _FORM or w in said or any(len(w) >= 5 and s.startswith(w) for s in said):
            continue
        out.append(word)
    return out


def _stem_set(text: str) -> set[str]:
    return {stem(t) for t in re.findall(r"[a-z0-9][a-z0-9'.-]*[a-z0-9]|[a-z0-9]", text.lower())}


def context(chat: ChatIndex, rows: list[int]) -> list[Said]:
    """The evidence rows, each followed by its replies (reply links, else the next messages of the
    others in its session) and preceded by its writer's message before (same session)."""
    out: list[Said] = []
    seen: set[int] = set()

    def add(row: int, role: str, of: int) -> None:
        if 0 <= row < chat.size and row not in seen:
            seen.add(row)
            out.append(Said(row, role, of))

    for row in rows[:LOOK_AT]:
        add(row, "evidence", row)
        for reply in replies(chat, row):
            add(reply, "reply", row)
        before = row - 1
        if before >= 0 and chat.speakers[before] == chat.speakers[row] and chat.sessions[before] == chat.sessions[row]:
            add(before, "before", row)
    return out


def replies(chat: ChatIndex, row: int) -> list[int]:
    if chat.reply_rows.get(row):
        return chat.reply_rows[row]
    if chat.reply_rows and chat.parent_row[row] >= 0:
        return []
    following = [r for r in range(row + 1, min(row + 1 + 2 * FOLLOWING, chat.size))
                 if chat.sessions[r] == chat.sessions[row] and chat.speakers[r] != chat.speakers[row]
                 and (not chat.reply_rows or chat.parent_row[r] < 0)]
    return following[:FOLLOWING]


def later_changes(chat: ChatIndex, row: int, about: set[str], typed) -> list[int]:
    """Later messages that change what ``row`` said: a statement of the same type (``typed``)
    sharing a word of ``about`` with a change word, or a proposal of the same type in the same
    session that the next message of another agrees to."""
    found = []
    for r in range(row + 1, chat.size):
        text = chat.raw_texts[r]
        if not typed(text):
            continue
        shares = bool(_stem_set(text) & about)
        if shares and _CHANGE.search(text) and not text.rstrip().endswith("?"):
            found.append(r)
        elif chat.sessions[r] == chat.sessions[row] and _CHANGE.search(text) and r + 1 < chat.size \
                and chat.speakers[r + 1] != chat.speakers[r] and _AGREE.search(chat.raw_texts[r + 1]):
            found.append(r)
    return found


def answer(run, evidence: list[answer_mod.EvidenceMessage]):
    """(answer, claims, unknowns, added evidence) read from the conversation; None when the
    question is not of a kind read here or nothing fits."""
    chat = run.retriever.chat(run.chat_file)
    if never := unmentioned(run.question, chat):
        note = f"No message of this chat mentions: {', '.join(never)}"
        return answer_mod.NO_ANSWER, [], [note], []
    kind = question_kind(run.question, run.facets.intent)
    if kind is None:
        return None
    rows = [chat.row_of[e.message.local_id] for e in evidence if e.message.local_id in chat.row_of and not e.reply_to]
    if not rows:
        return None
    said = context(chat, rows)
    about = topic_stems(run.question, chat)
    found = READERS[kind](chat, said, about, run.question)
    if found is None:
        return None
    text, cited, claim_kind, sentence = found
    cited = cited if isinstance(cited, list) else [cited]
    claim = answer_mod.Claim(text, [chat.local_ids[r] for r in cited], kind=claim_kind, sentence=sentence)
    return text, [claim], [], cited


def _statements(text: str) -> list[str]:
    return [s for s in sentences(text) if not s.rstrip().endswith("?")]


def _clauses(sentence: str) -> list[str]:
    return [c.strip(" ,;:-") for c in re.split(r"[,;:]\s+|\s+-\s+", sentence) if c.strip(" ,;:-")]


_IRREGULAR = {"found": "find", "broke": "break", "gave": "give", "got": "get", "paid": "pay", "brought": "bring",
              "took": "take", "made": "make", "bought": "buy", "sent": "send", "left": "leave", "went": "go",
              "came": "come", "said": "say", "told": "tell", "won": "win", "drove": "drive", "wrote": "write",
              "saw": "see", "ran": "run", "met": "meet", "sold": "sell", "kept": "keep", "lost": "lose"}


def _asks(text: str) -> bool:
    """Whether a sentence of ``text`` asks something ("Who broke the lamp though 😅" asks without a "?")."""
    return any(s.rstrip().endswith("?") or _ASKS.match(s) for s in sentences(text))


def _act(question: str) -> set[str]:
    """Stems of the verb of a who-question ("Who fixed ..." -> fix, "Who gave ..." -> give, gave)."""
    m = re.match(r"\W*who\s+(?:(?:is|was|will|would|can|could|has|had|did|does|'s)\s+)?([a-z]+)", question.lower())
    if not m or m.group(1) in STOPWORDS:
        return set()
    word = m.group(1)
    return {stem(word), word, *([stem(_IRREGULAR[word]), _IRREGULAR[word]] if word in _IRREGULAR else [])}


def _who(chat: ChatIndex, said: list[Said], about: set[str], question: str):
    """The person doing what the question asks (its verb, or only its object when no message has
    the verb): the person a statement names before the verb, or its writer speaking of
    themselves ("I'll fix it today", "Fixed in PR #482"); for a message asking it, its reply's
    writer or the person the reply names ("That was Sofia's friend Jonas")."""
    speakers = {s.lower(): s for s in chat.speaker_names}
    act = _act(question)
    for wanted in ([act] if act else []) + [about - act]:
        for item in said:
            text = chat.raw_texts[item.row]
            for sentence in _statements(text):
                words = _stem_set(sentence)
                if not words & wanted or _asks(sentence):
                    continue
                if name := _named(sentence, speakers, wanted):
                    return name, [item.row], "name", text
                if _FIRST_PERSON.search(sentence) or re.match(r"^\W*[A-Z][a-z]+ed\b", sentence):
                    return chat.speakers[item.row], [item.row], "author", text
        for item in said:
            text = chat.raw_texts[item.row]
            asked = [x for x in sentences(text) if _asks(x) and _stem_set(x) & wanted]
            if not asked or item.role != "evidence":
                continue
            for reply in replies(chat, item.row):
                answer_text = chat.raw_texts[reply]
                if _asks(answer_text):
                    continue
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
    act_at = min((m.start() for m in re.finditer(r"[A-Za-z0-9'-]+", text) if stem(m.group().lower()) in about),
                 default=len(text))
    names = []
    for m in tokens:
        name = m.group().lstrip("@")
        first = name.split()[0].lower()
        after, before = text[m.end():], text[:m.start()]
        if first in _NOT_NAMES or name.lower() in places or _PLACE_BEFORE.search(before):
            if first in ("dr", "mr", "mrs", "ms") and len(name.split()) > 1:
                name = name  # a title and a name: the name with its title
            else:
                continue
        if m.start() == 0 or re.search(r"[.!?]\s*$", before):  # a sentence's first word: only a known speaker
            if first not in speakers and first not in ("dr", "mr", "mrs", "ms"):
                continue
        if re.match(r"^['’]s\b", after) or re.match(r"^\s*(?:,|can you|could you|are you|do you|will you)", after):
            continue
        if not anywhere and m.start() > act_at:
            continue
        names.append(speakers.get(first, name))
    return names[-1] if names else None


def _time_of(text: str) -> list[re.Match]:
    return list(_TIME.finditer(text))


def _time(chat: ChatIndex, said: list[Said], about: set[str], question: str):
    """A clock time: of the messages giving one, those sharing most of the question's words, the
    latest of them (a later time changes the plan); the time nearest those words."""
    candidates = [s.row for s in said if _time_of(chat.raw_texts[s.row]) and not chat.raw_texts[s.row].rstrip().endswith("?")]
    for s in said:
        if s.role == "evidence":
            candidates += later_changes(chat, s.row, about, lambda t: bool(_time_of(t)))
    if not candidates:
        return None
    row = max(set(candidates), key=lambda r: (len(_stem_set(chat.raw_texts[r]) & about), chat.positions[r]))
    text = chat.raw_texts[row]
    words = [m.start() for m in re.finditer(r"[A-Za-z'-]+", text) if stem(m.group().lower()) in about] or [0]
    best = min(_time_of(text), key=lambda m: min(abs(m.start() - w) for w in words))
    return ("at " if best.group("bare") else "") + best.group(0).strip(), row, "phrase", text


def _amounts(text: str) -> list[tuple[float, str, str]]:
    """(value, as written, what follows) of each number that is an amount: no time, date,
    version, score, id or count of things ("14 pizzas")."""
    out = []
    for m in _NUMBER.finditer(text):
        after, before = text[m.end():], text[:m.start()]
        if re.match(r"^\s*(?:am|pm|st|nd|rd|th|%|x\b)", after, re.I) or re.search(r"\b(?:at|v|pr|#)\s*$", before, re.I):
            continue
        if re.match(r"^\s*(?:of us|ways|people|games?|tests?|failures?|fields?|slices?|pizzas?|goals?|nights?|"
                     r"weeks?|days?|hours?|minutes?|months?|years?|min|mins|merchant|accounts?)\b", after, re.I):
            continue
        value = float(m.group(1).replace(",", ""))
        if 1900 <= value <= 2100 and "." not in m.group(1):
            continue
        if re.match(r"^\s*[a-z]", after) and not _MONEY_AFTER.match(after):
            continue
        out.append((value, m.group(0).strip(), after))
    return out


def _amount(chat: ChatIndex, said: list[Said], about: set[str], question: str, each: bool = False):
    """An amount from the messages about the question (most shared words, then the latest); a
    share per person when "each" is asked: written as one ("62 each"), else the total split by
    the people counted in the same message ("250 split 6 ways")."""
    rows = [s.row for s in said if _amounts(chat.raw_texts[s.row]) and not chat.raw_texts[s.row].rstrip().endswith("?")
            and (_stem_set(chat.raw_texts[s.row]) & about or s.role == "reply")]
    if not rows:
        return None
    ranked = sorted(set(rows), key=lambda r: (-len(_stem_set(chat.raw_texts[r]) & about), -chat.positions[r]))
    if each:
        for row in ranked + [s.row for s in said if s.row not in ranked]:
            text = chat.raw_texts[row]
            shares = [a for a in _amounts(text) if _EACH_AFTER.match(a[2])]
            if shares:
                return f"{shares[-1][1]} each", row, "phrase", text
            people = _COUNT_OF_PEOPLE.search(text)
            if people and (amounts := _amounts(text)):
                n = people.group(1) or people.group(2)
                count = int(n) if n.isdigit() else _NUMBER_WORDS[n.lower()]
                total = max(a[0] for a in amounts)
                return f"about {total / count:.0f} each ({total:g} split {count} ways)", row, "split", text
    row = ranked[0]
    text = chat.raw_texts[row]
    amounts = _amounts(text)
    total = [a for a in amounts if re.match(r"^\s*total", a[2], re.I)]
    chosen = (total or amounts)[0]
    return chosen[1] + (" each" if _EACH_AFTER.match(chosen[2]) else " total" if total else ""), row, "phrase", text


def _count(chat: ChatIndex, said: list[Said], about: set[str], question: str):
    """A count: the number written before the question's noun ("12,400 merchant accounts"), or
    the last number of a reply to a message asking it ("25 is a lot ..., let's say 20")."""
    for s in said:
        text = chat.raw_texts[s.row]
        for m in _NUMBER.finditer(text):
            if any(stem(w.lower()) in about for w in re.findall(r"[A-Za-z]+", text[m.end():])[:2]):
                return m.group(0).strip(), s.row, "phrase", text
        if s.role == "reply" and _ASKS.search(chat.raw_texts[s.of]) and (numbers := list(_NUMBER.finditer(text))):
            return numbers[-1].group(0).strip(), s.row, "phrase", text
    return None


def _why(chat: ChatIndex, said: list[Said], about: set[str], question: str):
    """The reason clause: after a causal word; else, for a message asking about the thing, its
    reply; else the message's other sentence; else its writer's message before."""
    for s in said:
        if s.role != "evidence" or not _stem_set(chat.raw_texts[s.row]) & about:
            continue
        text = chat.raw_texts[s.row]
        if (m := _CAUSE.search(text)) and not text[m.start():].rstrip().endswith("?"):
            return _clauses(m.group(0))[0], s.row, "phrase", text
        asking = [x for x in sentences(text) if x.rstrip().endswith("?") or re.match(r"^\W*(?:who|what|why)\b", x, re.I)]
        if asking and not _PROPOSES.search(text):
            for r in replies(chat, s.row):
                if reason := _reason(chat.raw_texts[r], set()):
                    return reason, r, "phrase", chat.raw_texts[r]
        if reason := _reason(text, about):
            return reason, s.row, "phrase", text
        before = s.row - 1
        if before >= 0 and chat.speakers[before] == chat.speakers[s.row] and chat.sessions[before] == chat.sessions[s.row]:
            if reason := _reason(chat.raw_texts[before], set()):
                return reason, before, "phrase", chat.raw_texts[before]
    return None


def _reason(text: str, effect: set[str]) -> str | None:
    """The statements of ``text`` that do not restate the ``effect`` (the question's words), one
    clause of words at least: "guilty, sorry, I was on a deadline" -> "I was on a deadline"."""
    for sentence in _statements(text):
        if _stem_set(sentence) & effect:
            continue
        clauses = [c for c in _clauses(sentence) if len(re.findall(r"[A-Za-z]{2,}", c)) >= 3]
        if clauses:
            return ", ".join(clauses)
    return None


def _when(chat: ChatIndex, said: list[Said], about: set[str], question: str):
    """A date said in the best evidence message, or in the later message that changes it."""
    first = next((s for s in said if s.role == "evidence" and _stem_set(chat.raw_texts[s.row]) & about), None)
    if first is None:
        return None
    changes = later_changes(chat, first.row, about | _stem_set(chat.raw_texts[first.row]) - _COMMON,
                            lambda t: resolve_date(t, chat.timestamps[0]) is not None)
    if not changes:
        return None
    row = changes[-1]
    resolved = resolve_date(chat.raw_texts[row], chat.timestamps[row])
    return resolved, row, "date", chat.raw_texts[row]


_COMMON = {stem(w) for w in ("ok", "yes", "the", "that", "this", "then", "now", "just", "really", "good", "great")}

READERS = {"who": _who, "time": _time, "each": lambda *a: _amount(*a, each=True), "amount": _amount, "count": _count,
           "why": _why, "when": _when}
