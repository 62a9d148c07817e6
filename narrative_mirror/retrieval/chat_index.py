"""One chat held in memory for search (``ChatIndex``: message arrays, BM25 indexes, message /
window / block / thread vectors) and the per-message scores of one query against it
(``QueryScores``).

What a query does per message of the chat is vectorized (two dot products, a few sorts and
scatters); everything in Python loops is bounded by the candidate pool, the query's term postings
or the chat's vocabulary (entities: one matcher per chat), not by the chat's length.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np
import polars as pl
from scipy import sparse

from narrative_mirror.layers.l15_signals import speaks_of_self
from narrative_mirror.reactions import Reaction, stored
from narrative_mirror.retrieval import dense, query_names, query_understanding
from narrative_mirror.retrieval.fusion import Fused
from narrative_mirror.retrieval.lexical import BM25Index, Vocabulary, group_sum, widen
from narrative_mirror.retrieval.ram_use import deep_size
from narrative_mirror.retrieval.records import Hit

# From this many messages on, a chat's message cosines are computed in stretches of COSINE_CHUNK
# rows, all queries of a search_many together (dense.cosine_scores_chunked), and its window
# cosines are derived from them (ChatIndex.window_cosines) instead of read from a second matrix:
# per batch the vectors are read from memory once instead of twice per query. Equal to the direct
# scores up to float32 rounding, so smaller chats, the train chats among them, keep the direct
# numbers bit for bit.
CHUNKED_COSINES_FROM = 20_000
# Small enough that OpenBLAS keeps each product on one thread (a product split across both cores
# waits for the busy one; measurements in docs/decisions.md).
COSINE_CHUNK = 512


def _window_rows(size: int, width: int) -> list[range]:
    return [range(max(0, i - width), min(size, i + width + 1)) for i in range(size)]


def window_matrix(size: int, width: int):
    """The (row, row) 0/1 matrix of ``_window_rows``: times a count matrix, the window counts."""
    rows = np.arange(size, dtype=np.int64)
    pairs = [
        (rows[max(0, -d) : size - max(0, d)], rows[max(0, d) : size - max(0, -d)]) for d in range(-width, width + 1)
    ]
    return sparse.csr_matrix(
        (
            np.ones(sum(r.size for r, _ in pairs), dtype=np.int64),
            (np.concatenate([r for r, _ in pairs]), np.concatenate([c for _, c in pairs])),
        ),
        shape=(size, size),
    )


def window_means(vectors: np.ndarray, width: int, chunk: int = 256, *, norms_only: bool = False) -> np.ndarray:
    """Row i = the mean of ``vectors[_window_rows(n, width)[i]]``, bit for bit as
    ``vectors[list(w)].mean(axis=0)`` (float32, rows added in order, then divided), with the
    full-width windows added as shifted matrix sums, ``chunk`` rows at a time (in cache: ~10x
    faster than whole-matrix sums on 44,720 x 384) instead of one mean per row. ``norms_only``:
    just the length of each mean (float64), without keeping the means."""
    size, full = vectors.shape[0], 2 * width + 1
    out = np.empty(size) if norms_only else np.empty_like(vectors)

    def put(rows: slice | int, means: np.ndarray) -> None:
        out[rows] = np.linalg.norm(means, axis=-1) if norms_only else means

    if size >= full:
        complete = size - full + 1  # windows with all their rows: those of rows width .. size-width-1
        for start in range(0, complete, chunk):
            end = min(start + chunk, complete)
            total = vectors[start:end].copy()
            for d in range(1, full):
                total += vectors[start + d : end + d]
            put(slice(start + width, end + width), total / full)
        edges = [*range(width), *range(size - width, size)]
    else:
        edges = range(size)
    for i in edges:
        put(i, vectors[list(range(max(0, i - width), min(size, i + width + 1)))].mean(axis=0))
    return out


def reactions(messages: pl.DataFrame) -> list[tuple[Reaction, ...]]:
    """Per message, its reactions; none for a table written before the column existed."""
    if "reactions" not in messages.columns:
        return [()] * messages.height
    return [stored(row) for row in messages["reactions"].to_list()]


def flags(messages: pl.DataFrame, column: str) -> list[bool]:
    """Per message, the boolean ``column`` ("edited", "bot"); False for a table written before the
    column existed."""
    if column not in messages.columns:
        return [False] * messages.height
    return [bool(e) for e in messages[column].to_list()]


class ChatIndex:
    """One chat held in memory: message arrays, BM25 indexes, message/window/block/thread vectors."""

    def __init__(
        self,
        chat_file: str,
        messages: pl.DataFrame,
        blocks: pl.DataFrame,
        threads: pl.DataFrame,
        *,
        window: int,
        stem: bool,
    ):
        if messages.height == 0:
            raise ValueError(f"chat {chat_file!r} has no indexed messages")
        self.chat_file = chat_file
        self.size = messages.height
        self.local_ids: list[str] = messages["local_id"].to_list()
        self.message_ids: list[str] = messages["message_id"].to_list()
        self.positions: list[int] = messages["position"].to_list()
        self.sessions: list[int] = messages["session"].to_list()
        self.speakers: list[str] = messages["speaker"].to_list()
        self.raw_texts: list[str] = messages["raw_text"].to_list()
        self.texts: list[str] = messages["text"].to_list()
        self.timestamps: list[datetime] = messages["timestamp"].to_list()
        self.times = messages["timestamp"].to_numpy().astype("datetime64[us]")
        self.block_ids: list[str | None] = messages["block_id"].to_list()
        refs, tiers = messages["refs"].to_list(), messages["importance_tier"].to_list()
        self.refs = dict(zip(self.local_ids, refs))
        self.tiers = dict(zip(self.local_ids, tiers))
        self.row_of = {lid: i for i, lid in enumerate(self.local_ids)}
        self.row_of_message = {mid: i for i, mid in enumerate(self.message_ids)}
        # Reply links (exports that carry them): the row each message answers, the rows answering it.
        replies_to = messages["reply_to"].to_list() if "reply_to" in messages.columns else [None] * self.size
        self.edited: list[bool] = flags(messages, "edited")
        self.bots: list[bool] = flags(messages, "bot")
        self.reactions = reactions(messages)
        self.parent_row = np.array([self.row_of.get(p, -1) if p else -1 for p in replies_to], dtype=np.int64)
        self.reply_rows: dict[int, list[int]] = {}
        for row in np.flatnonzero(self.parent_row >= 0).tolist():
            self.reply_rows.setdefault(int(self.parent_row[row]), []).append(row)
        self.vectors = np.asarray(messages["vector"].to_numpy(), dtype=np.float32)
        # Per-message arrays the learned fusion reads (learned_fusion.FEATURES).
        self.session_array = np.array(self.sessions, dtype=np.int64)
        self.log_words = np.log1p([len(t.split()) for t in self.raw_texts])
        self.is_question = np.array(["?" in t for t in self.raw_texts], dtype=np.float64)
        self.after_question = np.concatenate([[0.0], self.is_question[:-1]])
        self.first_person = np.array([speaks_of_self(t) for t in self.raw_texts], dtype=np.float64)
        self.tier_array = np.array(tiers, dtype=np.float64)
        self.refs_array = np.array(refs, dtype=np.float64)
        self.temporal = (messages["temporal"].list.len().fill_null(0).to_numpy() > 0).astype(np.float64)

        # Every text is tokenized once: the window and block indexes add up message counts.
        vocabulary = Vocabulary(stem)
        counts = vocabulary.count(self.texts)
        block_texts = blocks["text"].to_list() if blocks.height else []
        block_counts = vocabulary.count(block_texts)
        counts = widen(counts, len(vocabulary))
        # kept for chat_append.appended: new messages are counted alone, the indexes rebuilt from counts
        self.window, self.message_counts = window, counts
        self.bm25 = BM25Index.from_counts(vocabulary, counts)
        self.window_bm25 = BM25Index.from_counts(vocabulary, window_matrix(self.size, window) @ counts)
        self.chunked_cosines = self.size >= CHUNKED_COSINES_FROM
        if self.chunked_cosines:
            # A window's cosine is its messages' mean cosine over the length of their mean vector:
            # kept as lengths, not as a second matrix to read per query (see window_cosines).
            self.window_norms = window_means(self.vectors, window, norms_only=True)
            rows = np.arange(self.size)
            self.window_bounds = (np.maximum(rows - window, 0), np.minimum(rows + window + 1, self.size))
            self.window_vectors = None
        else:
            self.window_vectors = dense.normalize_rows(window_means(self.vectors, window), in_place=True)

        self.block_names: list[str] = blocks["block_id"].to_list() if blocks.height else []
        block_number = {b: i for i, b in enumerate(self.block_names)}
        self.block_members: dict[str, list[str]] = (
            dict(zip(self.block_names, blocks["message_ids"].to_list())) if blocks.height else {}
        )
        self.block_of = np.array([block_number.get(b, -1) if b else -1 for b in self.block_ids], dtype=np.int64)
        row_of = self.row_of.get
        self.block_rows = {
            i: [r for r in map(row_of, self.block_members[b]) if r is not None] for i, b in enumerate(self.block_names)
        }
        self.block_vectors = (
            np.asarray(blocks["vector"].to_numpy(), dtype=np.float32)
            if blocks.height
            else np.zeros((0, self.vectors.shape[1]), np.float32)
        )
        # A block's text: its label / summary / keywords, then its messages.
        self.block_bm25 = BM25Index.from_counts(
            vocabulary,
            block_counts + group_sum([self.block_rows[i] for i in range(len(self.block_names))], self.size) @ counts,
        )

        self.thread_names: list[str] = threads["thread_id"].to_list() if threads.height else []
        self.thread_blocks = {
            i: [block_number[b] for b in bs if b in block_number]
            for i, bs in enumerate(threads["block_ids"].to_list() if threads.height else [])
        }
        self.thread_vectors = (
            np.asarray(threads["vector"].to_numpy(), dtype=np.float32)
            if threads.height
            else np.zeros((0, self.vectors.shape[1]), np.float32)
        )
        self.thread_of = np.full(len(self.block_names), -1, dtype=np.int64)
        for t, bs in self.thread_blocks.items():
            for b in bs:
                self.thread_of[b] = t

        speaker_texts = list(zip(self.speakers, self.raw_texts))
        self.speaker_names = list(dict.fromkeys(self.speakers))
        speaker_number = {s: i for i, s in enumerate(self.speaker_names)}
        self.speaker_codes = np.array([speaker_number[s] for s in self.speakers], dtype=np.int64)
        # speaker_aliases in two steps: the votes are kept, so appended messages only add theirs
        self.addressed = [self.speakers[p] if p >= 0 else None for p in self.parent_row.tolist()]
        self.alias_votes = query_names.alias_votes(speaker_texts, self.speaker_names, self.addressed)
        self.aliases = query_names.aliases_from_votes(self.alias_votes, self.speaker_names, "\n".join(self.raw_texts))
        self.entities = sorted(set(messages["entities"].explode().drop_nulls().to_list()))
        self.entity_matcher = query_names.EntityMatcher(self.entities, exclude=[*self.speaker_names, *self.aliases])
        self.start, self.end = min(self.timestamps), max(self.timestamps)
        self.nbytes = self._estimate_bytes()

    def _estimate_bytes(self) -> int:
        """Estimated memory held: arrays, index postings, the Python lists and dicts and what they
        hold (lists of more than 2,000 objects from a sample of them)."""
        total = sum(
            deep_size(v, depth=2 if k in ("block_members", "block_rows", "thread_blocks", "reply_rows") else 1)
            for k, v in vars(self).items()
            if isinstance(v, np.ndarray | list | tuple | dict)
        )
        total += sum(index.nbytes for index in (self.bm25, self.window_bm25, self.block_bm25))
        return int(total + len(self.bm25.vocabulary) * 120 + len(self.entities) * 100)

    def linked_rows(self, row: int) -> list[int]:
        """The row ``row`` answers (when it is a reply) and the rows answering it, in file order."""
        parent = int(self.parent_row[row])
        return sorted(([parent] if parent >= 0 else []) + self.reply_rows.get(row, []))

    def window_cosines(self, cosines: np.ndarray) -> np.ndarray:
        """On a chat with ``chunked_cosines``: the window cosines from the message ``cosines``,
        cos(normalized window mean, q) = mean of the window's message cosines / |window mean|
        (float64 prefix sums; equal to the cosine of the window vector up to float32 rounding)."""
        starts, ends = self.window_bounds
        prefix = np.concatenate([[0.0], np.cumsum(cosines, dtype=np.float64)])
        means = (prefix[ends] - prefix[starts]) / (ends - starts)
        return np.divide(means, self.window_norms, out=np.zeros(self.size), where=self.window_norms > 0).astype(
            np.float32
        )

    def speaker_mask(self, persons: Sequence[str], rows: np.ndarray | None = None) -> np.ndarray:
        """Whether each message (of ``rows``) was written by one of ``persons``."""
        named = set(persons)
        wanted = [i for i, s in enumerate(self.speaker_names) if s in named]
        codes = self.speaker_codes if rows is None else self.speaker_codes[rows]
        return np.isin(codes, wanted)

    def parse(self, query: str) -> query_understanding.QueryInfo:
        return query_understanding.parse_query(
            query,
            speakers=self.speaker_names,
            aliases=self.aliases,
            chat_start=self.start,
            chat_end=self.end,
            entity_matcher=self.entity_matcher,
        )

    def hit(
        self, row: int, score: float, reasons: dict[str, float] | None = None, sources: list[str] | None = None
    ) -> Hit:
        return Hit(
            local_id=self.local_ids[row],
            message_id=self.message_ids[row],
            position=self.positions[row],
            session=self.sessions[row],
            speaker=self.speakers[row],
            text=self.raw_texts[row],
            timestamp=self.timestamps[row],
            score=float(score),
            reasons=dict(reasons or {}),
            sources=list(sources or []),
            block_id=self.block_ids[row],
            edited=self.edited[row],
            reactions=self.reactions[row],
        )


class QueryScores:
    """Per-message scores of one query against one chat, each computed at most once (the
    hybrid lists and the learned-fusion features read the same ones)."""

    def __init__(self, chat: ChatIndex, query: str, qvec: np.ndarray | None, **known: np.ndarray):
        self.chat, self.query, self.qvec = chat, query, qvec
        self._values: dict[str, np.ndarray] = dict(known)  # e.g. cosine=... computed in a batch
        self.base: Fused | None = None  # the fusion hybrid_lists ordered its filtered lists by

    @classmethod
    def batch(cls, chat: ChatIndex, queries: Sequence[str], qvecs: Sequence[np.ndarray | None]) -> list[QueryScores]:
        """One per query. On a chat of ``CHUNKED_COSINES_FROM`` messages or more, the message
        cosines of all queries in one chunked pass."""
        if not chat.chunked_cosines or not queries or any(q is None for q in qvecs):
            return [cls(chat, q, v) for q, v in zip(queries, qvecs)]
        computed = dense.cosine_scores_chunked(chat.vectors, np.stack(qvecs), chunk=COSINE_CHUNK)
        return [cls(chat, q, v, cosine=computed[i]) for i, (q, v) in enumerate(zip(queries, qvecs))]

    def _message_cosines(self) -> np.ndarray:
        if self.chat.chunked_cosines:
            return dense.cosine_scores_chunked(self.chat.vectors, self.qvec.reshape(1, -1), chunk=COSINE_CHUNK)[0]
        return dense.cosine_scores(self.chat.vectors, self.qvec)

    def _window_cosines(self) -> np.ndarray:
        if self.chat.chunked_cosines:
            return self.chat.window_cosines(self.cosine)
        return dense.cosine_scores(self.chat.window_vectors, self.qvec)

    def _get(self, name: str, compute) -> np.ndarray:
        if name not in self._values:
            self._values[name] = compute()
        return self._values[name]

    @property
    def cosine(self) -> np.ndarray:
        return self._get("cosine", self._message_cosines)

    @property
    def cosine_window(self) -> np.ndarray:
        return self._get("cosine_window", self._window_cosines)

    @property
    def bm25(self) -> np.ndarray:
        return self._get("bm25", lambda: self.chat.bm25.scores(self.query))

    @property
    def bm25_window(self) -> np.ndarray:
        return self._get("bm25_window", lambda: self.chat.window_bm25.scores(self.query))
