"""What a "what" question asks for, read from one evidence sentence in the sentence's own words:
the names something was given ("He named the parrots Quasar and Nimbus" -> "Quasar and Nimbus"),
colours ("Dark blue with a white stripe"), a role ("the branch coordinator job", "I start as
branch coordinator" -> "branch coordinator"), and people ("Mr. Okafor did the measuring and
Jonah and I did the lifting" -> "Mr. Okafor and Jonah"). ``asked_kind`` tells which one a
question wants (None: an open question, answered by the phrase of slots.py).
"""

from __future__ import annotations

import re
from collections.abc import Collection

from narrative_mirror.agent.text import time_phrases
from narrative_mirror.layers.text import STOPWORDS

COLOURS = (
    "red|orange|yellow|green|blue|purple|violet|pink|brown|black|white|grey|gray|beige|teal|turquoise|navy|"
    "maroon|gold|golden|silver|cream|ivory|lilac|lavender|magenta|crimson|scarlet|olive|mint|coral|"
    "burgundy|indigo|khaki|tan|aqua|cyan"
)
_COLOUR = re.compile(
    rf"\b(?:(?:dark|light|pale|bright|deep|navy|sea|sky|forest|off)[ -])?(?:{COLOURS})\b"
    rf"(?:[ -](?:{COLOURS})\b)?",
    re.I,
)
# Words after the last colour that still belong to it: "a white stripe", "blue paint"
_COLOUR_NOUN = re.compile(r"\s+(?P<noun>[a-z][a-z-]*)\b")
_NAMING = re.compile(r"\b(?:name[ds]?|call(?:ed|s)?)\b", re.I)
# "named the parrots Quasar and Nimbus", "called him Pickle", "their names are Ada and Bo"
_GIVEN_NAMES = re.compile(
    r"\b(?:named|called|names?\s+(?:is|are|was|were))\s+(?:(?:the|his|her|their|my|our|your|them|him|it|both|two|"
    r"three|new|little)\s+)*(?:[a-z][\w-]*\s+)?(?P<names>[A-Z][\w'-]*(?:(?:,\s*|\s+and\s+|\s*&\s*)[A-Z][\w'-]*)*)"
)
_ROLE_NOUNS = {
    "job",
    "jobs",
    "position",
    "positions",
    "role",
    "roles",
    "title",
    "career",
    "profession",
    "occupation",
    "post",
}
# "the branch coordinator job", "a new sales position"
_ROLE_BEFORE = re.compile(
    r"\b(?:the|a|an|my|her|his|their|your|that|this)\s+(?P<role>(?:[a-z][\w-]*\s+){1,3})"
    r"(?:job|position|role|post)\b",
    re.I,
)
# "start as branch coordinator", "works as a nurse"
_ROLE_AS = re.compile(r"\b(?:as|become|became|becoming)\s+(?:a|an|the)?\s*(?P<role>[a-z][\w-]*(?:\s+[a-z][\w-]*){0,2})")
_NOT_ROLE = {
    "new",
    "dream",
    "old",
    "first",
    "next",
    "other",
    "big",
    "good",
    "great",
    "full",
    "part",
    "time",
    "well",
    "soon",
    "much",
    "long",
    "far",
    "usual",
    "always",
    "ever",
    "if",
    "though",
    "part-time",
    "full-time",
    "perfect",
    "amazing",
}
_TITLE = re.compile(r"\b(?:Mr|Mrs|Ms|Miss|Dr|Prof|Aunt|Uncle|Grandma|Grandpa)\.?\s+[A-Z][\w'-]*")
_CAPITALIZED = re.compile(r"\b[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*")
# Capitalized but not people: days, months, greetings, exclamations.
_NOT_PEOPLE = set(
    "monday tuesday wednesday thursday friday saturday sunday january february march april may june "
    "july august september october november december ok okay lol omg haha yes no yay wow hey hi oh "
    "thanks".split()
)
# Kinds of things a chat writes with capitals: "which cities", "what movies", "what TV shows".
NAMED_KINDS = set(
    "cities city countries country places place destinations destination states movies movie films film "
    "shows show tv series books book companies company brands brand teams team restaurants restaurant "
    "bands band songs song artists artist famous".split()
)
_QUESTION_NOUN = re.compile(r"\b(?:what|which)\s+(?:(?:kind|type|sort)s?\s+of\s+)?(?P<noun>[a-z][\w-]*)", re.I)


# What "which/what <noun>" leaves open without naming a thing ("what time", "which one", "what did")
_OPEN_NOUNS = frozenset(
    "time times day days date dates year month week one ones way ways thing things place places else "
    "did does do is was are were will would can could should has have had".split()
)


def asked_noun(question: str) -> str | None:
    """The thing a "which/what <noun>" question asks for ("Which team won the quiz?": team; "What
    size T-shirt ...?": size); None for other questions and open words ("what time", "which one")."""
    found = _QUESTION_NOUN.match(question.strip())
    noun = found.group("noun").lower() if found else None
    return noun if noun and noun not in _OPEN_NOUNS else None


def asked_kind(question: str, intent: str) -> str | None:
    """ "names" (what something was named or called), "colour", "role", "people" (a "who"
    question), or None."""
    if intent == "who":
        return "people"
    if intent != "what":
        return None
    lowered = question.lower()
    if re.search(r"\bcolou?rs?\b", lowered):
        return "colour"
    noun = _QUESTION_NOUN.search(question)
    if noun and noun.group("noun").lower() in _ROLE_NOUNS:
        return "role"
    if _NAMING.search(question) and re.search(r"\bwhat\b", lowered):
        return "names"
    if noun and noun.group("noun").lower() in NAMED_KINDS:
        return "named"
    return None


# "what drinks", "which recipes", "what tv shows"; "what are her hobbies"
_ASKED_WORDS = re.compile(
    r"\b(?:what|which)\s+(?:(?P<kind>kind|type|sort)(?P<kinds>s)?\s+of\s+)?(?P<first>[a-z][\w-]*)(?:\s+(?P<second>[a-z][\w-]*))?",
    re.I,
)
_LIST_OPENING = re.compile(r"\b(?:what|which)\s+(?:are|were)\b", re.I)


def _plural(word: str) -> bool:
    return len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")) and word not in STOPWORDS


def asks_for_list(question: str, intent: str) -> bool:
    """Whether a "what" question asks for several things: a plural ("What drinks does Nicolas
    like?", "What are Emi's hobbies?", "What types of sports ..."), or any that names no one
    thing ("What food does Nicolas prefer?", "What is Paola learning?"); not one kind ("What kind
    of tomatoes ...") nor one event, a question pinned to a time ("What sport did Kevin play on
    21.01.2024?"). A "where" question about the past not pinned to a time asks for every place
    ("Where has Emi traveled?", "Where did Kevin go with his family?"; "Where does Ines run?": one)."""
    if intent == "where":
        return bool(_PAST.search(question)) and not time_phrases(question)
    if intent != "what":
        return False
    if asks_for_several(question):
        return True
    return not time_phrases(question) and not _ONE_KIND.search(question)


_PAST = re.compile(r"\b(?:did|has|have|had|was|were)\b", re.I)
_ONE_KIND = re.compile(r"\b(?:kind|type|sort)\s+of\b", re.I)


def asks_for_several(question: str) -> bool:
    """A plural asked for ("What drinks ...", "What are ... hobbies", "Which cities ...")."""
    if _LIST_OPENING.search(question):
        return True
    asked = _ASKED_WORDS.search(question)
    if not asked or asked.group("first").lower() in STOPWORDS:
        return False
    if asked.group("kind"):  # "what kind of tomatoes": one kind; "what types of sports": several
        return bool(asked.group("kinds"))
    words = [w.lower() for w in asked.group("first", "second") if w]
    return _plural(words[0]) or (len(words) == 2 and words[1] not in STOPWORDS and _plural(words[1]))


def read(kind: str, sentence: str, known: Collection[str], names: Collection[str] = ()) -> str | None:
    """The span of ``sentence`` that gives what a question of ``kind`` asks for, as written;
    ``known``: lower-case words the question already has (not an answer); ``names``: the chat's
    people and entities (a sentence may start with one)."""
    if kind == "colour":
        return _colours(sentence)
    if kind == "names":
        found = _GIVEN_NAMES.search(sentence)
        return found.group("names") if found and found.group("names").lower() not in known else None
    if kind == "role":
        return _role(sentence, known)
    if kind == "people":
        return _people(sentence, known, names)
    if kind == "named":
        return ", ".join(_capitalized(sentence, known, names)) or None
    return None


def _colours(sentence: str) -> str | None:
    found = list(_COLOUR.finditer(sentence))
    if not found:
        return None
    end = found[-1].end()
    noun = _COLOUR_NOUN.match(sentence, end)
    if noun and noun.group("noun").lower() not in STOPWORDS:
        end = noun.end()
    return sentence[found[0].start() : end]


def _role(sentence: str, known: Collection[str]) -> str | None:
    for pattern in (_ROLE_BEFORE, _ROLE_AS):
        for found in pattern.finditer(sentence):
            words = [w for w in found.group("role").split()]
            while words and (words[-1].lower() in STOPWORDS or words[-1].lower() in _NOT_ROLE):
                words.pop()
            while words and (words[0].lower() in STOPWORDS or words[0].lower() in _NOT_ROLE):
                words.pop(0)
            if words and not all(w.lower() in known for w in words):
                return " ".join(words)
    return None


def _capitalized(sentence: str, known: Collection[str], names: Collection[str]) -> list[str]:
    """The names the sentence writes with capitals that the question does not have, in order; a
    sentence's first word counts only as a title ("Mr. Okafor") or a name of the chat."""
    lowered_names = {n.lower() for n in names}
    found: list[str] = []
    taken: list[tuple[int, int]] = []
    for match in _TITLE.finditer(sentence):
        found.append(match.group())
        taken.append(match.span())
    for match in _CAPITALIZED.finditer(sentence):
        if any(a <= match.start() < b for a, b in taken):
            continue
        words = match.group().strip(" .").split()
        if match.start() == 0 and words[0].lower() not in lowered_names:
            words = words[1:]
        words = [
            w
            for w in words
            if w.lower() not in STOPWORDS
            and w.lower() not in _NOT_PEOPLE
            and w.lower() not in ("i", "i'm", "i've", "i'll")
        ]
        if words and not all(w.lower().rstrip("'s") in known for w in words):
            found.append(" ".join(words))
    return list(dict.fromkeys(f for f in found if f.lower() not in known))


def _people(sentence: str, known: Collection[str], names: Collection[str]) -> str | None:
    """Every person the sentence names that the question does not, joined with "and"."""
    found = _capitalized(sentence, known, names)
    if not found:
        return None
    return found[0] if len(found) == 1 else ", ".join(found[:-1]) + " and " + found[-1]
