"""What an open "what" question asks for, read from one evidence sentence as written: the asked
noun with the words that make it specific ("What class did Kevin have?" -> "economics class",
"Which recipe did Paola try?" -> "homemade pizza" of "a new recipe for homemade pizza") or the
object of the question's verb ("What did Elise buy?" -> "water and breakfast bars" of "I'm at
Walmart buying water and breakfast bars"). None when the sentence has neither: the phrase of
slots.py answers then.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from narrative_mirror.agent.text import stem
from narrative_mirror.layers.text import STOPWORDS

_AUX = r"(?:did|does|do|is|was|are|were|will|would|has|have|had|can|could|should|might)"
# "What TV show was Kate watching", "Which class did Emi attend", "What did Elise buy"
_ASKED = re.compile(
    rf"^\W*(?:\w+\s+){{0,3}}?(?:what|which)\s+(?:(?:kind|type|sort)s?\s+of\s+)?"
    rf"(?P<noun>(?:[\w'-]+\s+){{0,2}}?)(?P<aux>{_AUX})\s+(?P<rest>.*)",
    re.I,
)
# The question's subject before its verb: names, "her mom's", "both", "and".
_SUBJECT_WORD = re.compile(r"^(?:[A-Z][\w'’-]*|both|and|his|her|their|the|a|an|[\w-]+['’]s?)$")
# Verbs that carry no object of their own ("What is Paola planning to do?").
_LIGHT_VERBS = {
    "do",
    "does",
    "did",
    "doing",
    "be",
    "been",
    "being",
    "get",
    "got",
    "plan",
    "planning",
    "planned",
    "going",
    "want",
    "wants",
    "wanted",
    "try",
    "tried",
    "trying",
    "start",
    "started",
    "happen",
    "happened",
    "think",
    "thinks",
    "say",
    "said",
    "have",
    "has",
    "had",
    "having",
}
# Verbs the stopword list holds that still take an object ("What did Paola make?").
_COMMON_VERBS = {"make", "made", "take", "took", "like", "look", "feel", "felt", "went", "come", "came", "need", "know"}
_IRREGULAR = {
    "buy": "bought",
    "make": "made",
    "eat": "ate",
    "go": "went",
    "see": "saw",
    "take": "took",
    "give": "gave",
    "find": "found",
    "write": "wrote",
    "bring": "brought",
    "drink": "drank",
    "teach": "taught",
    "win": "won",
    "lose": "lost",
    "meet": "met",
    "leave": "left",
    "feel": "felt",
    "tell": "told",
    "choose": "chose",
    "wear": "wore",
    "sell": "sold",
    "spend": "spent",
    "send": "sent",
    "build": "built",
    "catch": "caught",
    "grow": "grew",
    "draw": "drew",
    "sing": "sang",
    "run": "ran",
    "read": "read",
    "learn": "learnt",
    "watch": "watched",
    "cook": "cooked",
    "get": "got",
    "fly": "flew",
}
# Words that end an object ("playing some volleyball with my friends"): a preposition, a
# conjunction, a time word.
_BOUNDARY = set(
    "with in at on for to from because when while but so which that who since after before as "
    "today yesterday tonight tomorrow this last next even though if until during than then "
    "or also too together".split()
)
_LEADING = set(
    "a an the some my our your his her their this that these those up out any more many much lots lot and or of".split()
)
# Words that make nothing specific: "my first Pilates class" -> "Pilates class".
_GENERIC = set(
    "new first last next favorite favourite fun great good nice interesting very really solid big "
    "little small whole same other another few several many usual amazing lovely quick long short "
    "old own real special".split()
)
_OBJECT_WORDS = 6
_AFTER_NOUN = re.compile(r"\s+(?:of|for|called|named|titled)\s+(?P<rest>.*)", re.I)
_TITLE = re.compile(r"^\s*[\"“'‘](?P<title>[^\"”'’]{2,60})[\"”'’]")


def asked(question: str) -> tuple[list[str], str | None]:
    """(the asked noun's words, lower case: "tv show" -> ["tv", "show"]; the question's verb or
    None): "What TV show was Kate watching?" -> (["tv", "show"], "watching")."""
    found = _ASKED.search(question)
    if not found:
        return [], None
    noun = [w.lower() for w in found.group("noun").split() if w.lower() not in STOPWORDS]
    words = re.findall(r"[\w'’-]+", found.group("rest"))
    index = 0
    while index < len(words) - 1 and _SUBJECT_WORD.match(words[index]):
        index += 1
    verb = words[index].lower() if index < len(words) and index > 0 else None
    return noun, verb if verb and verb not in _LIGHT_VERBS and (
        verb not in STOPWORDS or verb in _COMMON_VERBS
    ) else None


def _verb_forms(verb: str) -> set[str]:
    base = stem(verb)
    forms = {base}
    for plain, past in _IRREGULAR.items():
        if stem(plain) == base or past == verb:
            forms |= {stem(plain), stem(past)}
    return forms


def _object(words: list[str], start: int, known: Collection[str]) -> str | None:
    """The words from ``start`` to the first boundary (at most ``_OBJECT_WORDS``), leading
    articles and possessives left out; None when nothing new is left."""
    while start < len(words) and words[start].lower() in _LEADING:
        start += 1
    taken: list[str] = []
    for word in words[start : start + _OBJECT_WORDS]:
        bare = word.strip('.,!?;:"“”()')
        if not bare or bare.lower() in _BOUNDARY:
            break
        taken.append(bare)
        if bare != word.rstrip("\"”'’") or re.search(r"[.,!?;:]$", word):  # punctuation ends it
            break
    while taken and taken[-1].lower() in ("and", "or"):
        taken.pop()
    if all(w.lower() in STOPWORDS or w.lower() in _GENERIC or stem(w.lower()) in known_stems(known) for w in taken):
        return None
    return " ".join(taken)


def known_stems(known: Collection[str]) -> set[str]:
    return {stem(w) for w in known}


def read(sentence: str, question: str, known: Collection[str]) -> str | None:
    """The asked noun made specific, else the object of the question's verb, as written in
    ``sentence``; ``known``: the question's lower-case words."""
    noun, verb = asked(question)
    words = sentence.split()
    stems = [stem(w.strip(".,!?;:\"“”()'’").lower()) for w in words]
    if noun and stem(noun[-1]) in stems:
        at = stems.index(stem(noun[-1]))
        after = " ".join(words[at + 1 :])
        if title := _TITLE.match(after):  # sitcoms "Friends"
            return title.group("title").strip()
        if more := _AFTER_NOUN.match(" " + after):  # a recipe for homemade pizza
            if found := _object(more.group("rest").split(), 0, known):
                return found
        before: list[str] = []
        asked_verb = _verb_forms(verb) if verb else set()
        for word in reversed(words[max(0, at - 3) : at]):
            bare = word.strip("\"“”()'’").lower()
            if (
                not bare.isalpha()
                or bare in STOPWORDS
                or bare in _GENERIC
                or re.search(r"[.,!?;:]$", word)
                or stem(re.sub(r"ing$", "", bare)) in asked_verb
                or stem(bare) in asked_verb
            ):  # "making pasta"
                break
            before.insert(0, word.strip('"“”()'))
        if before and not all(w.lower() in known for w in before):
            return " ".join([*before, words[at].strip('.,!?;:"“”()')])
    if verb:
        forms = _verb_forms(verb)
        for at, word_stem in enumerate(stems):
            if word_stem in forms or stem(re.sub(r"ing$", "", words[at].lower())) in forms:
                if found := _object(words, at + 1, known):
                    return found
    return None
