"""BM25 over one chat's texts, in memory.

The index is built per chat when the chat is first queried; a query scores only the postings
of its terms. Scores are exactly those of ``bm25s`` (Lucene BM25, k1=1.5, b=0.75, float32; the
tests compare bit for bit) but the index is built with sparse matrix arithmetic instead of a
Python loop per document: the texts of a chat are tokenized ONCE (``Vocabulary.count``) and the
window and block indexes, whose documents are concatenations of messages, add up the messages'
term counts (``BM25Index.from_counts``). On a 44,720-message chat that builds the three indexes
in well under a second instead of ~14 s. Measured on the train chats against LanceDB's native
FTS (which scores with corpus statistics over all chats and costs ~5-10 ms a query through the
filter): see benchmarks/retrieval_variants.py.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence

import numpy as np
from scipy import sparse

from narrative_mirror.retrieval.fusion import order_desc

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_SEPARATOR = "\x00"
_WORD_OR_SEPARATOR = re.compile(_TOKEN.pattern + "|" + _SEPARATOR)
# bm25s.stopwords.STOPWORDS_EN, written out (tests/narrative_mirror/retrieval/test_lexical.py compares):
# importing bm25s imports numba, ~0.3 s of CPU in every process that searches.
LUCENE_STOPWORDS = frozenset(
    """a an and are as at be but by for if in into is it no not of on or such that the their then there
    these they this to was will with""".split()
)
# bm25s's (Lucene's) 33 words plus pronouns, auxiliaries and question words: in chat
# messages and questions about them these carry no topic.
STOPWORDS = LUCENE_STOPWORDS | frozenset(
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


@functools.lru_cache(maxsize=1 << 17)
def _word_token(word: str, stem: bool) -> str | None:
    """The token of one lower-case word as ``tokenize`` finds it (None: dropped)."""
    if word in STOPWORDS:
        return None
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) <= 1 or word in STOPWORDS:
        return None
    return light_stem(word) if stem else word


def _words(text: str) -> list[str]:
    return _TOKEN.findall(text.lower().replace("\u2019", "'"))


def tokenize(text: str, stem: bool = True) -> list[str]:
    """Lower-case word tokens (2+ characters) without ``STOPWORDS``, optionally stemmed."""
    tokens = [_word_token(w, stem) for w in _words(text)]
    return [t for t in tokens if t is not None]


class Vocabulary:
    """Token ids shared by the BM25 indexes of one chat (messages, windows, blocks)."""

    def __init__(self, stem: bool = True):
        self.stem = stem
        self.ids: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.ids)

    def count(self, texts: Sequence[str]) -> sparse.csr_matrix:
        """The (text, token id) count matrix of ``texts`` (``tokenize`` of each), adding new
        tokens to the vocabulary; its width is the vocabulary size after these texts.

        The texts are lower-cased in one call (joined by NUL characters, which lower() keeps and
        no text holds) and every distinct word is looked up once."""
        texts = list(texts)
        lowered = _SEPARATOR.join(texts).lower().replace("\u2019", "'").split(_SEPARATOR)
        if len(lowered) != len(texts):  # no texts, or a text holding the separator
            lowered = [t.lower().replace("\u2019", "'") for t in texts]
        words: list[str] = []
        for found in map(_TOKEN.findall, lowered):
            words.append(_SEPARATOR)  # each text's words follow one separator
            words += found
        word_ids = {_SEPARATOR: -2}  # word -> token id; -1: tokenize drops it
        for word in dict.fromkeys(words):  # first-seen order: the same ids on every run
            if word not in word_ids:
                token = _word_token(word, self.stem)
                word_ids[word] = -1 if token is None else self.ids.setdefault(token, len(self.ids))
        ids = np.fromiter(map(word_ids.__getitem__, words), dtype=np.int64, count=len(words))
        text_of = np.cumsum(ids == -2) - 1  # the text each word belongs to
        kept = ids >= 0
        counts = sparse.csr_matrix(
            (np.ones(int(kept.sum()), dtype=np.int64), (text_of[kept], ids[kept])), shape=(len(texts), len(self.ids))
        )
        counts.sum_duplicates()
        return counts

    def query_ids(self, query: str) -> list[int]:
        """Ids of the query's tokens that the vocabulary knows, in order (repeats kept)."""
        return [self.ids[t] for t in tokenize(query, self.stem) if t in self.ids]


def widen(counts: sparse.csr_matrix, width: int) -> sparse.csr_matrix:
    """``counts`` with ``width`` columns (a vocabulary grown since it was counted)."""
    if counts.shape[1] == width:
        return counts
    return sparse.csr_matrix((counts.data, counts.indices, counts.indptr), shape=(counts.shape[0], width))


def group_sum(groups: Sequence[Sequence[int]], size: int) -> sparse.csr_matrix:
    """The (group, row) 0/1 matrix of ``groups`` (lists of rows of ``range(size)``): times a
    count matrix, the counts of each group's texts joined (a row listed twice counts twice)."""
    lengths = np.fromiter((len(g) for g in groups), dtype=np.int64, count=len(groups))
    rows = np.repeat(np.arange(len(groups), dtype=np.int64), lengths)
    cols = np.fromiter((r for g in groups for r in g), dtype=np.int64, count=int(lengths.sum()))
    matrix = sparse.csr_matrix((np.ones(cols.size, dtype=np.int64), (rows, cols)), shape=(len(groups), size))
    matrix.sum_duplicates()
    return matrix


class BM25Index:
    """BM25 (Lucene variant, k1=1.5, b=0.75) over ``texts``; ids are the texts' positions.

    ``scores`` equals ``bm25s.BM25(k1=k1, b=b)`` indexed with ``tokenize`` of each text, bit for
    bit: idf = log(1 + (N - df + 0.5) / (df + 0.5)) in float32, per (text, term)
    float32(idf * tf / (k1 * (1 - b + b * len / avg_len) + tf)) computed in float64, summed in
    float32 over the query's terms in query order.
    """

    def __init__(self, texts: Sequence[str], *, stem: bool = True, k1: float = 1.5, b: float = 0.75):
        vocabulary = Vocabulary(stem)
        self._build(vocabulary, vocabulary.count(texts), k1, b)

    @classmethod
    def from_counts(
        cls, vocabulary: Vocabulary, counts: sparse.spmatrix, *, k1: float = 1.5, b: float = 0.75
    ) -> BM25Index:
        """The index of texts given by their (text, token id) counts over ``vocabulary``; e.g.
        ``group_sum(groups) @ vocabulary.count(texts)`` indexes the joined texts of each group."""
        index = cls.__new__(cls)
        index._build(vocabulary, counts, k1, b)
        return index

    def _build(self, vocabulary: Vocabulary, counts: sparse.spmatrix, k1: float, b: float) -> None:
        self.vocabulary = vocabulary
        self.stem = vocabulary.stem
        self.size = counts.shape[0]
        columns = sparse.csc_matrix(counts, dtype=np.int64)
        columns.sum_duplicates()  # also sorts each column's rows
        columns.eliminate_zeros()
        self._indptr = columns.indptr.astype(np.int64)
        self._rows = columns.indices.astype(np.int32)
        self._data = np.zeros(columns.nnz, dtype=np.float32)
        if self.size == 0 or columns.nnz == 0:
            return
        lengths = np.asarray(columns.sum(axis=1)).ravel().astype(np.int64)
        avg_len = lengths.mean()  # as bm25s: the mean of the int lengths (float64)
        df = np.diff(self._indptr)
        frequencies, term_frequency = np.unique(df, return_inverse=True)
        idf = np.array(
            [
                math.log(1 + (self.size - d + 0.5) / (d + 0.5)) if d else 0.0  # Python floats, as bm25s
                for d in frequencies.tolist()
            ],
            dtype=np.float32,
        )[term_frequency.reshape(-1)]
        tf = columns.data.astype(np.float64)  # counts: exact in float32 (bm25s) and float64 alike
        norm = k1 * ((1 - b) + b * lengths / avg_len)  # per text, float64
        weight = norm[self._rows]
        weight += tf
        np.divide(tf, weight, out=tf)  # tf / (norm + tf)
        tf *= np.repeat(idf.astype(np.float64), df)  # idf (float32) per posting
        self._data = tf.astype(np.float32)

    @property
    def nbytes(self) -> int:
        return self._indptr.nbytes + self._rows.nbytes + self._data.nbytes

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every text for ``query`` (0 where no query term occurs)."""
        scores = np.zeros(self.size, dtype=np.float32)
        width = self._indptr.size - 1
        for term in self.vocabulary.query_ids(query):
            if term < width:
                start, end = self._indptr[term], self._indptr[term + 1]
                scores[self._rows[start:end]] += self._data[start:end]  # one posting per text
        return scores

    def search(self, query: str, k: int | None = None) -> list[tuple[int, float]]:
        """(text index, score) of the texts matching ``query``, best first, at most ``k``."""
        return top_positive(self.scores(query), k)


def positive_order(scores: np.ndarray, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(indices, scores) with a score > 0, best first (ties: lower index first), at most ``k``."""
    hits = np.flatnonzero(scores > 0)
    order = hits[order_desc(scores[hits])]  # ties: lower index first (hits ascend)
    if k is not None:
        order = order[:k]
    return order, scores[order]


def top_positive(scores: np.ndarray, k: int | None = None) -> list[tuple[int, float]]:
    """Indices with a score > 0, best first (ties: lower index first), at most ``k``."""
    order, values = positive_order(scores, k)
    return list(zip(order.tolist(), values.astype(np.float64).tolist()))
