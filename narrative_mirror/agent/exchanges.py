"""The conversation around a message, as the answer step reads it (agent/conversation.py): its
replies (reply links where the chat has them, else the next messages of the others in its
session), its writer's messages before and after, the later messages that change what it said,
and the words a question is about (and those of them no message mentions)."""

from __future__ import annotations

import functools
import re
import threading
import weakref
from dataclasses import dataclass

import snowballstemmer

from narrative_mirror.agent.addressed import addresses_the_reader
from narrative_mirror.agent.exchange_values import kept
from narrative_mirror.agent.slots import sentences
from narrative_mirror.layers.text import STOPWORDS
from narrative_mirror.retrieval.chat_index import ChatIndex

_ENGLISH = snowballstemmer.stemmer("english")
_ENGLISH_LOCK = threading.Lock()  # a stemmer keeps its word in itself: one at a time (the API answers in threads)


@functools.lru_cache(maxsize=65536)
def word_stem(word: str) -> str:
    """The Snowball (Porter2) English stem: "paddleboard" and "paddleboarding", "cancelled" and
    "cancel", "applied" and "apply" are one stem each (the agent's crude ``text.stem`` makes
    "paddleboar" of the first)."""
    with _ENGLISH_LOCK:
        return _ENGLISH.stemWord(re.sub(r"['’]s$", "", word))


LOOK_AT = 5  # the best this many evidence messages are read with their conversation
FOLLOWING = 3  # without reply links: this many next messages of the others answer a message
_FORM = {
    word_stem(w)
    for w in (
        "much",
        "many",
        "time",
        "cost",
        "costs",
        "pay",
        "paid",
        "price",
        "each",
        "person",
        "people",
        "per",
        "total",
    )
}
ASKS = re.compile(
    r"^\W*(?:who|what|when|where|why|how|which|is|are|was|were|do|does|did|has|have|will|would)\b|\?", re.I
)
PROPOSES = re.compile(
    r"\b(?:can|could|shall|should)\s+(?:we|someone|somebody|anyone|you)\b|\blet'?s\b|\bhow about\b|"
    r"\bwhat about\b",
    re.I,
)
_CHANGE = re.compile(
    r"\b(?:instead|moved?|moving|changed?|postponed?|rescheduled?|pushed|what about|how about|"
    r"(?:we're|we are|it's|it is) now|update)\b",
    re.I,
)
_AGREE = re.compile(r"\b(?:works|it is|fine|ok|okay|sure|yes|agreed|deal|sounds good|perfect)\b", re.I)


@dataclass
class Said:
    row: int
    role: str  # "evidence", "reply" (answers an evidence message), "before" / "after" (its writer's message before / after)
    of: int  # the evidence row it belongs to


def topic_stems(question: str, chat: ChatIndex) -> set[str]:
    """Stems of what the question is about: its content words, the speakers and its form aside."""
    people = {w for s in chat.speaker_names for w in s.lower().split()}
    words = re.findall(r"[a-z0-9][a-z0-9'.-]*[a-z0-9]|[a-z0-9]", question.lower())
    return {word_stem(w) for w in words if w not in _FUNCTION and w not in people and len(w) >= 2} - _FORM


# Words of a question's grammar, not of what it is about (the index's STOPWORDS also drop verbs
# such as "come", "go", "get" that a question may be about).
_GENERAL_HEADS = frozenset(
    {"point", "spot", "place", "location", "time", "day", "date", "plan", "details", "arrangements"}
)
_FUNCTION = frozenset(
    """a an the this that these those it its i me my we us our you your he him his she her they them
their who whom whose what which when where why how is are was were be been being am do does did doing have has had
will would shall should can could may might must to of in on at by for with from into about as and or but if so not
no yes there here any some all each every than then too very just also""".split()
)


_DETERMINER = {"the", "a", "an", "his", "her", "their", "my", "our", "its", "your", "any", "some"}
# "for ..." after a verb of paying is what is paid for: kept ("How much did Chris pay for his boots?")
_TRAILING_SETTING = re.compile(
    r"\s+(?:at|on|in|with|during|after|before|from|into|(?<!pay )(?<!paid )(?<!spend )"
    r"(?<!spent )for)\s+[^?]*\??$",
    re.I,
)


# Words about the talk itself ("What games are they discussing?"), not a topic a message names.
_TALK = {
    "discuss",
    "discussing",
    "discussed",
    "mention",
    "mentioned",
    "mentions",
    "talk",
    "talking",
    "talked",
    "say",
    "said",
    "conversation",
    "conversations",
    "chat",
    "chats",
    "refer",
    "refers",
    "context",
}


def unmentioned(question: str, chat: ChatIndex) -> list[str]:
    """The words naming what the question asks about that no message of the chat mentions (by
    stem): the head of each noun after a determiner, with a modifier that is a name or a version
    ("the wifi password", "the v2.4 release"), and the question's last word ("Where did they go
    hiking?"), a setting it adds at its end aside ("at the cabin", "for the trip"). "What was the
    wifi password?" asks of something never said when no message says "password". Not asked of
    a yes/no question (whether "Elise is vegan" is for the answer to judge), nor of words about
    the talk itself. A photo's caption counts as said ("the photo of the clouds")."""
    if re.match(r"\W*(?:is|are|was|were|do|does|did|can|could|has|have|had|will|would)\b", question, re.I):
        return []
    core = _TRAILING_SETTING.sub("", question.strip()).rstrip(" ?")
    words = [re.sub(r"['’]s$", "", w) for w in re.findall(r"[A-Za-z0-9][A-Za-z0-9'’.-]*[A-Za-z0-9]|[A-Za-z0-9]", core)]
    # An amount asked for: the verb a "did"/"does" puts after its subject, and what follows it,
    # only relate the amount ("How much did the bake sale raise?": the chat says "£236 from the
    # bake sale"; "How much do I owe Priya?"): the last word is not asked about, a thing named
    # with a determiner is ("... for the photo of the clouds"). Elsewhere the verb names what
    # happened ("What did the plumber charge?", "Where did the team celebrate?").
    amount_verb = bool(re.match(r"\W*how (?:much|many)\b.*\b(?:did|does|do)\b", core, re.I))
    if amount_verb and len(words) > 1 and words[-1][:1].islower() and words[-2].lower() not in _DETERMINER:
        words = words[:-1]  # the verb, out of the noun before it ("the bake sale raise")
    # a passive's verb names nothing either: "Where's the LAN being held?" (the chat says "Where:
    # 1st Todmorden Scout Hut"), "Where are the prizes being kept?"
    if len(words) > 1 and words[-2].lower() in ("being", "been", "be"):
        words = words[:-1]
    # ... nor does the verb a "where's"/"what time is" puts last: "Where's the set build happening?"
    # ("Where did they go hiking?" asks about the hiking)
    if re.match(r"\W*(?:what time|\w+)(?:['’]s|\s+(?:is|are|was|were))\b", core, re.I) and re.search(
        r"\w(?:ing|ed)$", words[-1]
    ):
        words = words[:-1]
    people = {s.lower() for s in chat.speaker_names} | {w for s in chat.speaker_names for w in s.lower().split()}
    named: list[str] = []
    phrase: list[str] = []
    for n, word in enumerate(words + [""]):
        low = word.lower()
        verb = n + 1 < len(words) and words[n + 1].lower() in _DETERMINER  # "fix the boiler": "fix" acts on the noun
        if phrase and (not word or low in STOPWORDS or low in _DETERMINER or verb or word_stem(low) in _FORM):
            named += [w for w in phrase[:-1] if re.search(r"[a-z]\d|^[A-Z]", w)] + [
                phrase[-1]
            ]  # the head, named modifiers
            phrase = []
        if low in _DETERMINER:
            phrase = [""]
        elif phrase is not None and phrase and low not in STOPWORDS and not verb:
            phrase.append(word)
    named = [w for w in named if w]
    if words and words[-1].lower() not in STOPWORDS and not re.fullmatch(r"[\d.]+", words[-1]) and not amount_verb:
        named.append(words[-1])
    said = set().union(*(word_stems(t) for t in chat.texts))  # with the captions of its images

    def mentioned(word: str) -> bool:
        w = word_stem(word)
        return w in said or any(len(w) >= 5 and s.startswith(w) for s in said)

    # a general head named by the word before it: "the meeting point" is where we meet
    lowered = [w.lower() for w in words]
    qualified = {
        w for w in _GENERAL_HEADS if w in lowered and lowered.index(w) > 0 and mentioned(lowered[lowered.index(w) - 1])
    }
    out = []
    for word in dict.fromkeys(w.lower() for w in named):
        if word in people or word in _TALK or word_stem(word) in _FORM or mentioned(word) or word in qualified:
            continue
        if "-" in word and all(mentioned(part) for part in word.split("-") if len(part) >= 3):
            continue
        out.append(word)
    return out


def per_chat(compute):
    """``compute(chat)`` once per chat object (a chat grown by a live add is a new object)."""
    cache: weakref.WeakKeyDictionary[ChatIndex, object] = weakref.WeakKeyDictionary()

    @functools.wraps(compute)
    def cached(chat: ChatIndex):
        if chat not in cache:
            cache[chat] = compute(chat)
        return cache[chat]

    return cached


@per_chat
def people_words(chat: ChatIndex) -> frozenset[str]:
    """Each word of the chat's people's names and aliases, in lower case ("sofia", "reyes")."""
    return frozenset(w for name in [*chat.speaker_names, *chat.aliases] for w in name.lower().split())


@per_chat
def lowercase_words(chat: ChatIndex) -> frozenset[str]:
    """The words the chat writes in lower case somewhere, its people's names and aliases aside: a
    capitalised one of them ("As maid of honour", "Photo book", "Temporary Event Notice") is an
    ordinary word, not someone's name ("marek already the MVP" is still Marek)."""
    names = people_words(chat)
    return frozenset(
        w for t in chat.raw_texts for w in re.findall(r"(?<![\w@'’])[a-z]+(?![\w'’])", t) if w not in names
    )


@per_chat
def flagged_rows(chat: ChatIndex) -> frozenset[int]:
    """Rows of messages that tell their reader how to answer (agent/addressed.py): data, never
    evidence, so the conversation read around the evidence skips them too."""
    return frozenset(r for r, t in enumerate(chat.raw_texts) if addresses_the_reader(t))


# Cosine of the packaged embedder between two single words that name the same thing ("wood" and
# "boards" .67); words that only share a setting stay below ("plumber" and "sink" .57, "hire" and
# "work" .55, "wine" and "food" .43).
SAME_THING_MIN = 0.6


def said_in_other_words(word: str, texts: list[str], encode) -> bool:
    """Whether a word of ``texts`` (the messages read for the question) names what ``word`` names:
    "the wood for the raised beds" is answered by "spare larch boards"."""
    words = sorted({w for t in texts for w in re.findall(r"[a-z]{3,}", t.lower())} - STOPWORDS - _FUNCTION)
    if not words:
        return False
    vectors = encode([word, *words])
    return float((vectors[1:] @ vectors[0]).max()) >= SAME_THING_MIN


def word_stems(text: str) -> set[str]:
    return {word_stem(t) for t in re.findall(r"[a-z0-9][a-z0-9'.-]*[a-z0-9]|[a-z0-9]", text.lower())}


def context(chat: ChatIndex, rows: list[int]) -> list[Said]:
    """The evidence rows, each followed by its replies (reply links, else the next messages of the
    others in its session) and preceded by its writer's message before (same session)."""
    out: list[Said] = []
    seen: set[int] = set()

    flagged = flagged_rows(chat)

    def add(row: int, role: str, of: int) -> None:
        if 0 <= row < chat.size and row not in seen and row not in flagged:
            seen.add(row)
            out.append(Said(row, role, of))

    for row in rows[:LOOK_AT]:
        add(row, "evidence", row)
        for reply in replies(chat, row):
            add(reply, "reply", row)
        before = row - 1
        if before >= 0 and chat.speakers[before] == chat.speakers[row] and chat.sessions[before] == chat.sessions[row]:
            add(before, "before", row)
        after = next(
            (
                r
                for r in range(row + 1, min(row + 1 + FOLLOWING, chat.size))
                if chat.speakers[r] == chat.speakers[row] and chat.sessions[r] == chat.sessions[row]
            ),
            None,
        )
        if after is not None:
            add(after, "after", row)
    return out


def replies(chat: ChatIndex, row: int) -> list[int]:
    """The rows answering ``row`` (reply links, else the next messages of the others in its
    session), flagged messages aside."""
    flagged = flagged_rows(chat)
    if chat.reply_rows.get(row):
        return [r for r in chat.reply_rows[row] if r not in flagged]
    if chat.reply_rows and chat.parent_row[row] >= 0:
        return []
    following = [
        r
        for r in range(row + 1, min(row + 1 + 2 * FOLLOWING, chat.size))
        if chat.sessions[r] == chat.sessions[row]
        and chat.speakers[r] != chat.speakers[row]
        and (not chat.reply_rows or chat.parent_row[r] < 0)
        and r not in flagged
    ]
    return following[:FOLLOWING]


def later_changes(chat: ChatIndex, row: int, about: set[str], typed, values=None) -> list[int]:
    """Later messages that change what ``row`` said: a statement of the same type (``typed``)
    sharing a word of ``about`` with a change word, or a proposal of the same type in the same
    session that the next message of another agrees to. With ``values`` (a pattern of the type's
    values), only one giving a value ``row`` did not ("Going to be useless Saturday" moves no
    "Saturday 28th")."""
    found = []
    flagged = flagged_rows(chat)
    earlier = chat.raw_texts[row].lower()
    for r in range(row + 1, chat.size):
        text = chat.raw_texts[r]
        # a bot's reminder repeats a plan as it was set up; it changes nothing a person said
        if r in flagged or chat.bots[r] or not typed(text):
            continue
        if values is not None and all(m.group(0).lower() in earlier for m in kept(list(values.finditer(text)), text)):
            continue
        shares = bool(word_stems(text) & about)
        if (shares and _CHANGE.search(text) or negates(text, chat.raw_texts[row])) and not text.rstrip().endswith("?"):
            found.append(r)
        elif (
            chat.sessions[r] == chat.sessions[row]
            and _CHANGE.search(text)
            and r + 1 < chat.size
            and chat.speakers[r + 1] != chat.speakers[r]
            and _AGREE.search(chat.raw_texts[r + 1])
        ):
            found.append(r)
    return found


# "not 7", "not the 16:42", "not Friday": a value said not to hold
_NOT_VALUE = re.compile(r"\bnot\s+(?:the\s+|at\s+|on\s+)?([£$€]?\d[\d:.,]*(?:am|pm)?|[A-Z][a-z]+)")
_VALUE = re.compile(r"[£$€]?\d[\d:.,]*(?:am|pm)?|[A-Za-z]+")


def _value_word(token: str) -> str:
    return re.sub(r"(?:am|pm)$", "", token.lower().lstrip("£$€").rstrip(".,"))


def negates(text: str, earlier: str) -> bool:
    """Whether ``text`` says a value ``earlier`` gave does not hold: "we're at 6:30 not 7"
    corrects "table for five at 7pm", whatever words the two share."""
    said = {_value_word(m.group(0)) for m in _VALUE.finditer(earlier)}
    return any(_value_word(m.group(1)) in said for m in _NOT_VALUE.finditer(text))


def correction_of(chat: ChatIndex, row: int, typed) -> int:
    """The last message that corrects ``row`` (a statement of the same type, ``typed``, saying
    a value of it does not hold, or its writer's next words of that type opening with a
    correction: "sorry the 15:33!!", "*5pm"), following corrections of corrections; ``row`` when
    none."""
    flagged = flagged_rows(chat)
    for r in range(row + 1, chat.size):
        text = chat.raw_texts[r]
        if r in flagged or not typed(text) or text.rstrip().endswith("?"):
            continue
        own = chat.speakers[r] == chat.speakers[row] and r - row <= _CORRECTION_WITHIN and _CORRECTS.match(text)
        if own or negates(text, chat.raw_texts[row]):
            row = r
    return row


# A writer correcting what they just said
_CORRECTS = re.compile(r"^\W*(?:sorry\b|correction\b|oops\b|typo\b|i meant\b|scratch that\b|\*\s*\w)", re.I)
_CORRECTION_WITHIN = 6  # messages


def statements(text: str) -> list[str]:
    return [s for s in sentences(text) if not s.rstrip().endswith("?")]


def clauses(sentence: str) -> list[str]:
    return [c.strip(" ,;:-") for c in re.split(r"[,;:]\s+|\s+-\s+", sentence) if c.strip(" ,;:-")]


def asks(text: str) -> bool:
    """Whether a sentence of ``text`` asks something ("Who broke the lamp though 😅" asks without a "?")."""
    return any(s.rstrip().endswith("?") or ASKS.match(s) for s in sentences(text))


COMMON_WORDS = {
    word_stem(w) for w in ("ok", "yes", "the", "that", "this", "then", "now", "just", "really", "good", "great")
}
_NOT_CONTENT = COMMON_WORDS | {word_stem(w) for w in _FUNCTION | STOPWORDS}


def content_stems(text: str) -> set[str]:
    """Stems of ``text``'s words that name something: a later "update ... is on Sunday" shares
    no word with "dad's hip operation is next Tuesday" through "is" and "on"."""
    return word_stems(text) - _NOT_CONTENT
