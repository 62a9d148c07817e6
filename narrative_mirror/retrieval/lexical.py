"""BM25 over one chat's texts, in memory (bm25s).

Chats are small (<= ~1,600 messages), so the index is built per chat when the chat is first
queried and every query scores all texts in well under a millisecond. Measured on the train
chats against LanceDB's native FTS (which scores with corpus statistics over all chats and
costs ~5-10 ms a query through the filter): see benchmarks/retrieval_variants.py.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import bm25s
import numpy as np
from bm25s.stopwords import STOPWORDS_EN

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
# bm25s's (Lucene's) 33 words plus pronouns, auxiliaries and question words: in chat
# messages and questions about them these carry no topic.
STOPWORDS = frozenset(STOPWORDS_EN) | frozenset(
    """i me my mine myself you your yours yourself he him his himself she her hers herself we us
    our ours ourselves them theirs themselves its itself what which who whom whose when where why
    how do does did done doing have has had having am were been being can could would should
    shall may might must from up down out off over under again further once here than too very
    so just also only own same some any each few more most other both all nor about above below
    between through during before after because while until against im i'm you're it's that's
    don't didn't doesn't isn't wasn't can't won't i've i'll i'd you've you'll we're they're""".split()
)


def light_stem(word: str) -> str:
    """Strip common English inflections (plural -s/-es/-ies, -ing, -ed) from a lower-case word.

    Deliberately crude (no dictionary): it only has to map a question's word form and a
    message's word form of the same word to one key ("hikes"/"hiking"/"hiked" -> "hik").
    """
    if len(word) <= 3 or word.isdigit():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("es") and word[-3] in "sxz" or word.endswith(("ches", "shes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("ing") and len(word) > 5:
        word = word[:-3]
    elif word.endswith("ed") and len(word) > 4:
        word = word[:-2]
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


def tokenize(text: str, stem: bool = True) -> list[str]:
    """Lower-case word tokens (2+ characters) without ``STOPWORDS``, optionally stemmed."""
    words = [w for w in _TOKEN.findall(text.lower().replace("\u2019", "'")) if w not in STOPWORDS]
    words = [w[:-2] if w.endswith("'s") else w for w in words]
    words = [w for w in words if len(w) > 1 and w not in STOPWORDS]
    return [light_stem(w) for w in words] if stem else words


class BM25Index:
    """BM25 (Lucene variant, k1=1.5, b=0.75) over ``texts``; ids are the texts' positions."""

    def __init__(self, texts: Sequence[str], *, stem: bool = True, k1: float = 1.5, b: float = 0.75):
        self.size = len(texts)
        self.stem = stem
        self._model = bm25s.BM25(k1=k1, b=b)
        corpus = [tokenize(t, stem) for t in texts]
        self._vocab: set[str] = {w for doc in corpus for w in doc}
        if self.size and self._vocab:
            self._model.index(corpus, show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every text for ``query`` (0 where no query term occurs)."""
        terms = [t for t in tokenize(query, self.stem) if t in self._vocab]
        if not terms:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._model.get_scores(terms), dtype=np.float32)

    def search(self, query: str, k: int | None = None) -> list[tuple[int, float]]:
        """(text index, score) of the texts matching ``query``, best first, at most ``k``."""
        return top_positive(self.scores(query), k)


def top_positive(scores: np.ndarray, k: int | None = None) -> list[tuple[int, float]]:
    """Indices with a score > 0, best first (ties: lower index first), at most ``k``."""
    hits = np.flatnonzero(scores > 0)
    order = hits[np.lexsort((hits, -scores[hits]))]
    if k is not None:
        order = order[:k]
    return [(int(i), float(scores[i])) for i in order]
