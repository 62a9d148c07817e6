"""Who and what a question names, against one chat (rule-based, no LLM).

- Persons: the chat's speakers named in the question, by name or by an alias the chat itself
  reveals (``speaker_aliases``: RealTalk speakers go by another first name inside the chat,
  e.g. speaker "Emi" introduces herself as "Kate", and the questions say "Kate").
- Entities: the chat's known entities (L1.5 signals, lower-case) named in the question
  (``EntityMatcher``: one per chat).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from narrative_mirror.retrieval.query_time import MONTHS, WEEKDAYS

_BEFORE_NAME = r"(?<![\w-])"  # a name starts a word ...
_AFTER_NAME = r"(?:'s|’s)?(?![\w-])"  # ... and ends one, optionally with a possessive
_NAME_END = re.compile(_AFTER_NAME, re.I)


@functools.lru_cache(maxsize=4096)
def _word_pattern(name: str) -> re.Pattern:
    """``name`` as a whole word (case-insensitive, optional possessive); compiled once per name."""
    return re.compile(_BEFORE_NAME + re.escape(name) + _AFTER_NAME, re.I)


def _one_edit_apart(a: str, b: str) -> bool:
    """Equal up to one substitution, insertion, deletion or swap of neighbouring letters."""
    if a == b:
        return True
    if abs(len(a) - len(b)) > 1:
        return False
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    return (
        a[i + 1 :] == b[i + 1 :]
        or a[i:] == b[i + 1 :]
        or a[i + 1 :] == b[i:]
        or (a[i : i + 2] == b[i : i + 2][::-1] and a[i + 2 :] == b[i + 2 :])
    )


def first_names(speakers: Sequence[str]) -> dict[str, str]:
    """{first name (lower case): speaker} for speakers with a full name ("Ana Souza" in a Slack
    workspace is "Ana" in the questions), where no other speaker has that first name."""
    firsts: dict[str, list[str]] = {}
    for speaker in speakers:
        words = speaker.split()
        if len(words) > 1 and len(words[0]) > 1:
            firsts.setdefault(words[0].lower(), []).append(speaker)
    taken = {s.lower() for s in speakers}
    return {name: found[0] for name, found in firsts.items() if len(found) == 1 and name not in taken}


# Shorter names are too close to ordinary words ("Lisa" would catch "Mona Lisa" for "Liza").
MIN_TYPO_NAME = 5


def _names_in(query: str, speakers: Sequence[str], aliases: dict[str, str] | None) -> dict[str, str]:
    """{spelling (lower case): speaker} for the chat's names and aliases, plus the capitalized
    words of ``query`` that misspell one of them by one edit ("Nikolas" for "Nicolas")."""
    names = {s.lower(): s for s in speakers}
    names.update({a.lower(): s for a, s in (aliases or {}).items()})
    names.update({n: s for n, s in first_names(speakers).items() if n not in names})
    for word in {w.lower() for w in re.findall(r"\b[A-Z][a-z]+\b", query)} - names.keys():
        close = {
            s
            for n, s in names.items()
            if len(n) >= MIN_TYPO_NAME and len(word) >= MIN_TYPO_NAME and _one_edit_apart(word, n)
        }
        if len(close) == 1:
            names[word] = close.pop()
    return names


def persons(query: str, speakers: Sequence[str], aliases: dict[str, str] | None = None) -> list[str]:
    """Speakers the question names (canonical names, in order of first mention), by name, alias
    or a one-letter misspelling of either."""
    hits = []
    for name, speaker in _names_in(query, speakers, aliases).items():
        m = _word_pattern(name).search(query)
        if m:
            hits.append((m.start(), speaker))
    return list(dict.fromkeys(s for _, s in sorted(hits)))


def without_persons(query: str, speakers: Sequence[str], aliases: dict[str, str] | None = None) -> str:
    """The question with every speaker name and alias (misspelled or not, and its possessive)
    removed.

    Used as the content query: a speaker's name would otherwise match the ``speaker:`` prefix
    of all their messages and favour their shortest ones ("Is Elise vegan?" -> "Is vegan?").
    """
    for name in sorted(_names_in(query, speakers, aliases), key=len, reverse=True):
        query = _word_pattern(name).sub(" ", query)
    return re.sub(r"\s+", " ", query).strip()


def _may_share_a_start(shorter: str, longer: str) -> bool:
    """Could ``shorter`` and the start of ``longer`` both match (case-insensitively, as ``re.I``
    compares) one stretch of text? Distinct ASCII characters never do, except as upper/lower case
    of one letter; any other character might be a case variant of anything ("K", the Kelvin sign,
    matches "k"), so it is taken as a possible match."""
    return all(a == b or not (a.isascii() and b.isascii()) or a.lower() == b.lower() for a, b in zip(shorter, longer))


def _trie_pattern(names: Sequence[str]) -> str:
    """One regex alternation of ``names`` factored by common prefixes (a trie): the regex engine
    tries the alternatives of one node by their first character, so a position that starts no
    name fails in a few comparisons instead of one per name. Each name ends in an empty group,
    numbered 1.. in ``sorted(names)`` order; no name may be a prefix of another."""
    trie: dict = {}
    for name in names:
        node = trie
        for char in name:
            node = node.setdefault(char, {})
        node[None] = name

    def emit(node: dict) -> str:
        if None in node:  # a leaf: no name continues a name of the same layer
            return "()"
        branches = [re.escape(char) + emit(node[char]) for char in sorted(node)]
        return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"

    return emit(trie)


class EntityMatcher:
    """Finds a chat's known entities in questions: the result of ``entities`` (below), from a
    few regexes compiled once per chat instead of one regex per entity per question.

    The entities are split into layers in which no entity can match where another one of its
    layer matches (none is a possible prefix of another, ``_may_share_a_start``); each layer is
    one trie-shaped alternation inside a lookahead, so ``finditer`` reports, at every position,
    the one entity of the layer that matches there as a whole word (``_word_pattern``). From all
    (position, entity) pairs the per-entity greedy choice of ``entities`` is replayed exactly.
    """

    def __init__(self, known: Iterable[str], exclude: Iterable[str] = ()):
        skip = {e.lower() for e in exclude}
        self.names = sorted({e.lower() for e in known if e and len(e) > 2} - skip, key=lambda e: (-len(e), e))
        layers: list[list[str]] = []
        ascii_members: list[dict[int, set[str]]] = []  # per layer: length -> its ASCII names
        other_members: list[list[str]] = []  # per layer: names with other characters
        for name in sorted(self.names, key=lambda e: (len(e), e)):  # shorter names first
            for i, layer in enumerate(layers):
                if name.isascii():
                    clash = any(name[:n] in names for n, names in ascii_members[i].items()) or any(
                        _may_share_a_start(m, name) for m in other_members[i]
                    )
                else:
                    clash = any(_may_share_a_start(m, name) for m in layer)
                if not clash:
                    break
            else:
                i = len(layers)
                layers.append([])
                ascii_members.append({})
                other_members.append([])
            layers[i].append(name)
            if name.isascii():
                ascii_members[i].setdefault(len(name), set()).add(name)
            else:
                other_members[i].append(name)
        self._layers = [
            (re.compile(_BEFORE_NAME + "(?=" + _trie_pattern(layer) + _AFTER_NAME + ")", re.I), sorted(layer))
            for layer in layers
        ]

    def __len__(self) -> int:
        return len(self.names)

    def occurrences(self, query: str) -> dict[str, list[int]]:
        """{entity: the positions where it matches as a whole word, ascending}."""
        found: dict[str, list[int]] = {}
        for pattern, names in self._layers:
            for m in pattern.finditer(query):
                found.setdefault(names[m.lastindex - 1], []).append(m.start())
        return found

    def find(self, query: str) -> list[str]:
        """Known entities (lower-case) named in the question, longest first, no overlaps: each
        entity, longest first, takes its first whole-word match (in ``finditer`` order) that no
        longer entity has taken."""
        found = self.occurrences(query)
        taken = [False] * len(query)
        out = []
        for entity in sorted(found, key=lambda e: (-len(e), e)):
            free_from = 0  # finditer resumes after a match: no overlapping matches of one entity
            for start in found[entity]:
                if start < free_from:
                    continue
                end = _NAME_END.match(query, start + len(entity)).end()
                free_from = end
                if not any(taken[start:end]):
                    taken[start:end] = [True] * (end - start)
                    out.append(entity)
                    break
        return out


@functools.lru_cache(maxsize=16)
def _matcher(known: frozenset[str], exclude: frozenset[str]) -> EntityMatcher:
    return EntityMatcher(known, exclude)


def entities(query: str, known: Iterable[str], exclude: Iterable[str] = ()) -> list[str]:
    """Known entities (lower-case) named in the question, longest first, no overlaps.

    Each entity, longest first (then alphabetically), takes its first whole-word occurrence
    (``_word_pattern``) that overlaps no occurrence taken before. A chat's matcher is built once
    (``EntityMatcher``; the last 16 vocabularies are kept).
    """
    return _matcher(frozenset(known), frozenset(exclude)).find(query)


_INTRODUCTION = r"(?i:i'm|i’m|i am|my name is|my name's|call me|this is)"
_SELF_INTRO = re.compile(r"\b" + _INTRODUCTION + r"\s+([A-Z][a-z]+)\b(?=\s*(?:[.!,?]|$))")
_VOCATIVE = [
    re.compile(r"^([A-Z][a-z]+)\s*[!?,.]"),  # "Kate! How ..."
    re.compile(r",\s*([A-Z][a-z]+)\s*[!?.]*\s*$"),  # "... thank you, Kate!"
    re.compile(r"\b(?:[Hh]i|[Hh]ey|[Hh]ello|[Tt]hanks|[Tt]hank you|[Bb]ye|[Nn]ight|[Mm]orning)\s*,?\s+([A-Z][a-z]+)\b"),
]

# Capitalized sentence openers that look like vocatives ("Oh!", "Hello, ...").
_NOT_NAMES = frozenset(
    """oh ah aw aww ahh hmm hm wow yay yes yeah yep yup no nope ok okay sure well so plus also
    hello hi hey thanks thank sorry congrats congratulations haha lol omg great nice cool good
    awesome amazing perfect true exactly totally definitely absolutely honestly anyway btw
    morning night bye cheers welcome please wait really right""".split()
)


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"  # what re's \w (and so \b) means in str patterns


def _lower_case_in(word: str, joined: str) -> bool:
    """Whether lower-case ``word`` (letters a-z) is written as a whole word in ``joined`` (texts
    joined by newlines, no word characters): ``word in set(re.findall(r"\\b[a-z]+\\b", joined))``,
    found by substring search instead of listing every word of a chat."""
    at = joined.find(word)
    while at >= 0:
        end = at + len(word)
        if (at == 0 or not _is_word_char(joined[at - 1])) and (end == len(joined) or not _is_word_char(joined[end])):
            return True
        at = joined.find(word, at + 1)
    return False


_INTRODUCTION_PHRASES = ("i'm", "i’m", "i am", "my name is", "my name's", "call me", "this is")
# The non-ASCII letters re.I matches to the phrases' letters (İ, ı ~ i; ſ ~ s; the Kelvin sign ~ k).
_INTRODUCTION_FOLD = (("\u0130", "i"), ("\u0131", "i"), ("\u017f", "s"), ("\u212a", "k"))


def _introducing(texts: Sequence[str]) -> set[int]:
    """Indices of the texts holding an introduction phrase in any case ("I'm", "MY NAME IS",
    ...): only they can match ``_SELF_INTRO``. Plain substring searches over all texts joined by
    newlines, folded to lower case (no phrase holds a newline, so each hit lies in one text)."""
    joined = "\n".join(texts)
    for letter, ascii_letter in _INTRODUCTION_FOLD:
        joined = joined.replace(letter, ascii_letter)
    joined = joined.lower()
    if len(joined) != sum(map(len, texts)) + max(len(texts) - 1, 0):  # lower() changed lengths
        return set(range(len(texts)))
    hits = []
    for phrase in _INTRODUCTION_PHRASES:
        at = joined.find(phrase)
        while at >= 0:
            hits.append(at)
            at = joined.find(phrase, at + 1)
    starts = np.cumsum([0] + [len(t) + 1 for t in texts])
    return {int(i) for i in np.searchsorted(starts, hits, side="right") - 1} if hits else set()


def speaker_aliases(
    messages: Sequence[tuple[str, str]], min_votes: int = 2, addressees: Sequence[str | None] | None = None
) -> dict[str, str]:
    """Other first names the speakers go by, from (speaker, text) messages: {alias: speaker}.

    Evidence for "X is speaker S": S writes "I'm X." / "my name is X", or a message addressing X
    ("Kate!", "thanks, Kate", "hi Kate") is written to S: in a two-person chat the other speaker;
    in a group, the author of the message it replies to (``addressees``, per message: None where
    it is not a reply). X must be capitalized, never written in lower case anywhere in the chat
    (so "Wow!" or "Good!" do not count), not a speaker's name, and have ``min_votes`` votes, at
    least twice as many as for anyone else.
    """
    speakers = list(dict.fromkeys(s for s, _ in messages))
    return aliases_from_votes(
        alias_votes(messages, speakers, addressees), speakers, "\n".join(t for _, t in messages), min_votes
    )


def alias_votes(
    messages: Sequence[tuple[str, str]], speakers: Sequence[str], addressees: Sequence[str | None] | None = None
) -> dict[str, Counter]:
    """The votes of ``speaker_aliases`` cast by these messages of a chat whose speakers are
    ``speakers`` (``addressees`` as there): {name: Counter(speaker)}. Votes of two parts of a chat
    add up to the whole's."""
    texts = [t for _, t in messages]
    introducing = _introducing(texts)
    votes: dict[str, Counter] = {}
    for i, (speaker, text) in enumerate(messages):
        if i in introducing:
            for name in _SELF_INTRO.findall(text):
                votes.setdefault(name, Counter())[speaker] += 1
        if len(speakers) == 2:
            other = speakers[1] if speaker == speakers[0] else speakers[0]
        else:
            other = addressees[i] if addressees is not None and addressees[i] != speaker else None
        if other is not None:
            for pattern in _VOCATIVE:
                for name in pattern.findall(text):
                    votes.setdefault(name, Counter())[other] += 1
    return votes


def aliases_from_votes(
    votes: dict[str, Counter], speakers: Sequence[str], joined: str, min_votes: int = 2
) -> dict[str, str]:
    """``speaker_aliases`` from the chat's ``alias_votes`` and all its texts joined by newlines."""
    known = {s.lower() for s in speakers}
    aliases = {}
    for name, counter in votes.items():
        lower = name.lower()
        if (
            lower in known
            or lower in _NOT_NAMES
            or lower in MONTHS
            or lower in WEEKDAYS
            or _lower_case_in(lower, joined)
        ):
            continue
        (best, n), *rest = counter.most_common() + [(None, 0)]
        runner_up = rest[0][1] if rest else 0
        if n >= min_votes and n >= 2 * runner_up:
            aliases[name] = best
    return aliases
