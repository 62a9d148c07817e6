"""Word-level text helpers shared by the layers: tokens, stopwords, TF-IDF keywords."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence

# Curly apostrophes are common in the chats ("I’m"); tokens use the straight one.
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)*")

# English function words plus chat filler; a keyword must be none of these.
STOPWORDS = frozenset(
    """
    a about above after again against all almost also am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do does doesn't
    doing don't down during each either else even ever every few for from further get gets getting
    got had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself him
    himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself just let's like
    make made many may me might more most much must mustn't my myself need no nor not now of off on
    once one only or other ought our ours ourselves out over own quite rather really same say said
    shall shan't she she'd she'll she's should shouldn't since so some still such than that that's
    the their theirs them themselves then there there's these they they'd they'll they're they've
    thing things think this those though through thus to too under until up upon us very via want
    was wasn't way we we'd we'll we're we've well were weren't what what's when when's where where's
    whether which while who who's whom why why's will with within without won't would wouldn't yet
    you you'd you'll you're you've your yours yourself yourselves
    im ive id ill dont didnt doesnt cant wont isnt wasnt thats whats youre theyre hes shes lets
    yeah yea yes yep yup nope no ok okay oh ohh ah ahh aw aww haha hahaha hah lol lmao omg wow hmm
    hm um uh hey hi hello bye thanks thank please sure cool nice good great gonna wanna gotta kinda
    sorta pretty lot lots something anything nothing everything someone anyone everyone
    actually definitely probably maybe totally literally honestly basically especially though
    know going go goes went come came take took see saw look looks feel felt guess mean sounds sound
    right true fun day today time bit back around always never sometimes usually already soon
    """.split()
)


def straight_apostrophes(text: str) -> str:
    return text.translate(_APOSTROPHES)


def tokens(text: str) -> list[str]:
    """Lower-case word tokens (letters/digits with inner apostrophes), in order."""
    return _WORD.findall(straight_apostrophes(text).lower())


def content_tokens(text: str, exclude: Iterable[str] = ()) -> list[str]:
    """Tokens that can carry a topic: not stopwords, not numbers, >= 3 chars, not in ``exclude``."""
    excluded = STOPWORDS | {e.lower() for e in exclude}
    return [t for t in tokens(text) if len(t) >= 3 and not t.isdigit() and t not in excluded]


def tfidf_keywords(docs: Sequence[Sequence[str]], top_k: int) -> list[list[str]]:
    """Top ``top_k`` terms of each token list by tf * idf over ``docs``.

    idf = ln((1 + N) / (1 + df)) + 1 (smoothed), so a term in every doc still counts a little.
    Ties break alphabetically so the result is deterministic.
    """
    doc_freq = Counter(term for doc in docs for term in set(doc))
    n_docs = len(docs)
    result = []
    for doc in docs:
        counts = Counter(doc)
        scored = sorted(
            counts.items(),
            key=lambda item: (-item[1] * (math.log((1 + n_docs) / (1 + doc_freq[item[0]])) + 1), item[0]),
        )
        result.append([term for term, _ in scored[:top_k]])
    return result


def truncate(text: str, max_chars: int) -> str:
    """``text`` cut at a word boundary to at most ``max_chars`` characters, marked with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars - 1]
    if text[max_chars - 1] != " " and " " in cut:  # do not end inside a word
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:.") + "…"


def speaker_words(speakers: Iterable[str]) -> set[str]:
    """The speakers' names in lower case, and each word of a full name ("ana souza", "ana",
    "souza"): a group member is mentioned by first name."""
    names = {s.lower() for s in speakers}
    return names | {w for n in names if " " in n for w in n.split() if len(w) > 1}
