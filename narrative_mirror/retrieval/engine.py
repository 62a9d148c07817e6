"""The retrieval API the agent and the evaluation call: ``Retriever.search``.

Variants (``retrieval.toml`` ``default_variant`` picks the default, ``story_variant`` the one
narrative (arc) questions search with):
- ``bm25``: BM25 over the chat's messages (``speaker: text``).
- ``dense``: cosine over the message vectors.
- ``hybrid``: weighted RRF of ranked message lists: BM25 and dense over messages, over
  messages with their +-``window`` neighbours ("key expansion": window text / window mean
  vector), over blocks and threads (a message ranks by its block's / thread's score); then
  question-aware lists in that fused order: the messages written by the persons the question
  names, and the messages inside its time window. With ``strip_person_names`` the content
  lists search the question without the speakers' names (the speaker list carries them).
- ``hybrid_learned``: ``hybrid``'s candidate pool re-scored by the linear listwise model of
  retrieval.toml ``[learned]`` over the lists' ranks, raw scores, neighbours' scores and
  message signals (learned_fusion.py; trained on the train chats by benchmarks/train_fusion.py).
- ``hybrid_expand``: ``hybrid``, then the top hits lend decayed scores to their neighbours
  and block-mates (expansion.py).
- ``hybrid_expand_rerank``: ``hybrid_expand``, then the configured reranker.
- ``dual_path``: ``hybrid``'s leaf ranking re-fused by dual-path tree retrieval (tree.py).

Each chat's messages, vectors and BM25 indexes are read from the store once and kept in
memory (``ChatIndex``; least recently used chats are dropped past ``[cache] max_mb`` of
estimated memory), so a query costs one query encode plus numpy work. What a query does per
message of the chat is vectorized (two dot products, a few sorts and scatters); everything in
Python loops is bounded by the candidate pool, the query's term postings or the chat's vocabulary
(entities: one matcher per chat), not by the chat's length.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
import polars as pl
from scipy import sparse

from narrative_mirror import settings
from narrative_mirror.embedding import Embedder
from narrative_mirror.index_store import IndexStore
from narrative_mirror.layers.l15_signals import speaks_of_self
from narrative_mirror.retrieval import block_search, dense, expansion, query_understanding, tree
from narrative_mirror.retrieval.fusion import Fused, order_desc, rrf_fuse
from narrative_mirror.retrieval.learned_fusion import FACT_SLOT_TYPES, FEATURES, LearnedFusion, neighbour_max_at
from narrative_mirror.retrieval.lexical import BM25Index, Vocabulary, group_sum, positive_order, widen
from narrative_mirror.retrieval.rerank import Reranker, RerankContext, make_reranker

VARIANTS = ("bm25", "dense", "hybrid", "hybrid_learned", "hybrid_expand", "hybrid_expand_rerank", "dual_path")
# Softens the learned scores the agent grades with. Agent on train (498 q), exact recall /
# precision of the selected evidence: 1.0 -> fast .486/.410, balanced .517/.248; 2.0 -> fast
# .511/.388, balanced .547/.227; the hybrid variant: fast .489/.229, balanced .571/.174.
LEARNED_SCORE_TEMPERATURE = 2.0
# Estimated memory of the chats kept in memory (retrieval.toml [cache] max_mb overrides it):
# ChatIndex.nbytes is ~150 MB for a 44,720-message chat, ~3 MB for Chat_1 (476 messages).
DEFAULT_CACHE_MB = 1024.0
# From this many messages on, a chat's message cosines are computed in stretches of COSINE_CHUNK
# rows, all queries of a search_many together (dense.cosine_scores_chunked), and its window
# cosines are derived from them (ChatIndex.window_cosines) instead of read from a second matrix:
# per batch the vectors (69 MB at 44,720 messages) are read from memory once instead of twice per
# query. Equal to the direct scores up to float32 rounding, so smaller chats, the train chats
# among them, keep the direct numbers bit for bit.
CHUNKED_COSINES_FROM = 20_000
# 512 rows: small enough that OpenBLAS keeps each product on one thread. Larger products are split
# across both cores and wait for the other one when it is busy: measured under load, 5 queries over
# 44,720 rows took 255 ms in stretches of 4,096 rows and 12 ms in stretches of 512.
COSINE_CHUNK = 512


@dataclass
class Hit:
    local_id: str
    message_id: str
    position: int
    session: int
    speaker: str
    text: str
    timestamp: datetime
    score: float
    reasons: dict[str, float] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)  # which lists / stages brought it in
    block_id: str | None = None


@dataclass
class BlockHit:
    """An L1 block found by ``Retriever.search_blocks``, with ALL its messages."""

    block_id: str
    score: float  # RRF of the block lists
    thread_id: str | None  # its L2 thread
    members: list[Hit]  # ALL its messages, file order; score: from its rank in the search (1 = the best)
    sources: list[str]  # the block lists that ranked it among their first k


@dataclass
class SearchTrace:
    candidates: list[tuple[str, float]]  # checkpoint 1: the whole first-stage pool, ranked
    reranked: list[tuple[str, float]]  # checkpoint 2: the pool after expansion / reranking


@dataclass
class SearchResult:
    hits: list[Hit]
    trace: SearchTrace
    query_info: dict
    timings_ms: dict[str, float]


def _option(config: Mapping, dotted: str):
    node = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise ValueError(f"retrieval.toml: missing setting {dotted!r}")
        node = node[part]
    return node


REQUIRED_SETTINGS = (
    "default_variant", "story_variant", "rrf_k", "candidates", "lexical.backend", "lexical.stem",
    *(f"hybrid.{k}" for k in ("w_bm25", "w_dense", "window", "w_bm25_window", "w_dense_window", "w_block",
                             "w_block_bm25", "w_thread", "w_speaker", "w_time", "time_slack_hours",
                             "strip_person_names")),
    *(f"expand.{k}" for k in ("seeds", "before", "after", "decay", "block_decay")),
    *(f"tree.{k}" for k in ("anchors", "k_global", "density_threshold", "exploit_weights", "explore_weights")),
    "rerank.reranker",
)


def validate_config(config: Mapping) -> None:
    """Every setting the retriever reads is present and the choices are known."""
    missing = []
    for dotted in REQUIRED_SETTINGS:
        try:
            _option(config, dotted)
        except ValueError:
            missing.append(dotted)
    if missing:
        raise ValueError(f"retrieval.toml: missing settings {missing}")
    for key in ("default_variant", "story_variant"):
        if config[key] not in VARIANTS:
            raise ValueError(f"retrieval.toml: {key} {config[key]!r} not in {list(VARIANTS)}")
    if config["lexical"]["backend"] not in ("bm25s", "lancedb"):
        raise ValueError(f"retrieval.toml: lexical.backend {config['lexical']['backend']!r} not in ['bm25s', 'lancedb']")


def _window_rows(size: int, width: int) -> list[range]:
    return [range(max(0, i - width), min(size, i + width + 1)) for i in range(size)]


def _window_matrix(size: int, width: int):
    """The (row, row) 0/1 matrix of ``_window_rows``: times a count matrix, the window counts."""
    rows = np.arange(size, dtype=np.int64)
    pairs = [(rows[max(0, -d): size - max(0, d)], rows[max(0, d): size - max(0, -d)]) for d in range(-width, width + 1)]
    return sparse.csr_matrix(
        (np.ones(sum(r.size for r, _ in pairs), dtype=np.int64),
         (np.concatenate([r for r, _ in pairs]), np.concatenate([c for _, c in pairs]))), shape=(size, size))


def _window_means(vectors: np.ndarray, width: int, chunk: int = 256, *, norms_only: bool = False) -> np.ndarray:
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
                total += vectors[start + d: end + d]
            put(slice(start + width, end + width), total / full)
        edges = [*range(width), *range(size - width, size)]
    else:
        edges = range(size)
    for i in edges:
        put(i, vectors[list(range(max(0, i - width), min(size, i + width + 1)))].mean(axis=0))
    return out


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim`` (None elsewhere): hands freed heap memory back to the system."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):
        return None


def release_free_memory() -> None:
    """Return memory freed by a chat load or eviction to the system: a load's temporaries
    (~230 MB for 44,720 messages) otherwise stay in the allocators' free lists and in RSS."""
    try:
        import pyarrow

        pyarrow.default_memory_pool().release_unused()
    except Exception:  # noqa: BLE001 - an optimization only
        pass
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _items_size(items: Sequence) -> int:
    """Bytes of the objects in ``items``: exact up to 2,000 of them, else from every k-th one."""
    if len(items) <= 2000:
        return sum(map(sys.getsizeof, items))
    step = len(items) // 1000
    return int(sum(map(sys.getsizeof, items[::step])) * len(items) / len(range(0, len(items), step)))


def _deep_size(value, depth: int = 1) -> int:
    """Bytes of ``value`` and, ``depth`` levels down, of what its lists / dict values hold
    (dict keys are the chat's id strings, counted in their lists)."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, list | tuple):
        if depth <= 0:
            return sys.getsizeof(value)
        return sys.getsizeof(value) + (_items_size(value) if depth == 1
                                       else sum(_deep_size(v, depth - 1) for v in value))
    if isinstance(value, dict):
        values = list(value.values())
        return sys.getsizeof(value) + (_items_size(values) if depth == 1
                                       else sum(_deep_size(v, depth - 1) for v in values))
    return sys.getsizeof(value)


class ChatIndex:
    """One chat held in memory: message arrays, BM25 indexes, message/window/block/thread vectors."""

    def __init__(self, chat_file: str, messages: pl.DataFrame, blocks: pl.DataFrame, threads: pl.DataFrame,
                 *, window: int, stem: bool):
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
        self.bm25 = BM25Index.from_counts(vocabulary, counts)
        self.window_bm25 = BM25Index.from_counts(vocabulary, _window_matrix(self.size, window) @ counts)
        self.chunked_cosines = self.size >= CHUNKED_COSINES_FROM
        if self.chunked_cosines:
            # A window's cosine is its messages' mean cosine over the length of their mean vector:
            # kept as lengths, not as a second matrix to read per query (see window_cosines).
            self.window_norms = _window_means(self.vectors, window, norms_only=True)
            rows = np.arange(self.size)
            self.window_bounds = (np.maximum(rows - window, 0), np.minimum(rows + window + 1, self.size))
            self.window_vectors = None
        else:
            self.window_vectors = dense.normalize_rows(_window_means(self.vectors, window), in_place=True)

        self.block_names: list[str] = blocks["block_id"].to_list() if blocks.height else []
        block_number = {b: i for i, b in enumerate(self.block_names)}
        self.block_members: dict[str, list[str]] = (
            dict(zip(self.block_names, blocks["message_ids"].to_list())) if blocks.height else {})
        self.block_of = np.array([block_number.get(b, -1) if b else -1 for b in self.block_ids], dtype=np.int64)
        row_of = self.row_of.get
        self.block_rows = {
            i: [r for r in map(row_of, self.block_members[b]) if r is not None]
            for i, b in enumerate(self.block_names)
        }
        self.block_vectors = (np.asarray(blocks["vector"].to_numpy(), dtype=np.float32)
                              if blocks.height else np.zeros((0, self.vectors.shape[1]), np.float32))
        # A block's text: its label / summary / keywords, then its messages.
        self.block_bm25 = BM25Index.from_counts(
            vocabulary, block_counts + group_sum([self.block_rows[i] for i in range(len(self.block_names))],
                                                 self.size) @ counts)

        self.thread_names: list[str] = threads["thread_id"].to_list() if threads.height else []
        self.thread_blocks = {
            i: [block_number[b] for b in bs if b in block_number]
            for i, bs in enumerate(threads["block_ids"].to_list() if threads.height else [])
        }
        self.thread_vectors = (np.asarray(threads["vector"].to_numpy(), dtype=np.float32)
                               if threads.height else np.zeros((0, self.vectors.shape[1]), np.float32))
        self.thread_of = np.full(len(self.block_names), -1, dtype=np.int64)
        for t, bs in self.thread_blocks.items():
            for b in bs:
                self.thread_of[b] = t

        speaker_texts = list(zip(self.speakers, self.raw_texts))
        self.speaker_names = list(dict.fromkeys(self.speakers))
        speaker_number = {s: i for i, s in enumerate(self.speaker_names)}
        self.speaker_codes = np.array([speaker_number[s] for s in self.speakers], dtype=np.int64)
        self.aliases = query_understanding.speaker_aliases(speaker_texts)
        self.entities = sorted(set(messages["entities"].explode().drop_nulls().to_list()))
        self.entity_matcher = query_understanding.EntityMatcher(
            self.entities, exclude=[*self.speaker_names, *self.aliases])
        self.start, self.end = min(self.timestamps), max(self.timestamps)
        self.nbytes = self._estimate_bytes()

    def _estimate_bytes(self) -> int:
        """Estimated memory held: arrays, index postings, the Python lists and dicts and what they
        hold (lists of more than 2,000 objects from a sample of them)."""
        total = sum(_deep_size(v, depth=2 if k in ("block_members", "block_rows", "thread_blocks") else 1)
                    for k, v in vars(self).items() if isinstance(v, np.ndarray | list | tuple | dict))
        total += sum(index.nbytes for index in (self.bm25, self.window_bm25, self.block_bm25))
        return int(total + len(self.bm25.vocabulary) * 120 + len(self.entities) * 100)

    def window_cosines(self, cosines: np.ndarray) -> np.ndarray:
        """On a chat with ``chunked_cosines``: the window cosines from the message ``cosines``,
        cos(normalized window mean, q) = mean of the window's message cosines / |window mean|
        (float64 prefix sums; equal to the cosine of the window vector up to float32 rounding)."""
        starts, ends = self.window_bounds
        prefix = np.concatenate([[0.0], np.cumsum(cosines, dtype=np.float64)])
        means = (prefix[ends] - prefix[starts]) / (ends - starts)
        return np.divide(means, self.window_norms, out=np.zeros(self.size), where=self.window_norms > 0).astype(np.float32)

    def speaker_mask(self, persons: Sequence[str], rows: np.ndarray | None = None) -> np.ndarray:
        """Whether each message (of ``rows``) was written by one of ``persons``."""
        named = set(persons)
        wanted = [i for i, s in enumerate(self.speaker_names) if s in named]
        codes = self.speaker_codes if rows is None else self.speaker_codes[rows]
        return np.isin(codes, wanted)

    def parse(self, query: str) -> query_understanding.QueryInfo:
        return query_understanding.parse_query(
            query, speakers=self.speaker_names, aliases=self.aliases, chat_start=self.start, chat_end=self.end,
            entity_matcher=self.entity_matcher)

    def hit(self, row: int, score: float, reasons: dict[str, float] | None = None,
            sources: list[str] | None = None) -> Hit:
        return Hit(
            local_id=self.local_ids[row], message_id=self.message_ids[row], position=self.positions[row],
            session=self.sessions[row], speaker=self.speakers[row], text=self.raw_texts[row],
            timestamp=self.timestamps[row], score=float(score), reasons=dict(reasons or {}),
            sources=list(sources or []), block_id=self.block_ids[row])


def _ranking(scores: np.ndarray) -> np.ndarray:
    """All rows, best score first (ties: lower row first)."""
    return order_desc(scores)


def _spread(group_scores: np.ndarray, group_of: np.ndarray, tie_break: np.ndarray) -> np.ndarray:
    """Rows ranked by their group's score (rows in no group left out), ties in ``tie_break`` order."""
    if group_scores.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    groups = group_of[tie_break]
    rows = tie_break[groups >= 0]
    row_scores = group_scores[groups[groups >= 0]]
    if group_scores.min() >= 0:  # e.g. BM25: groups scoring 0 (mostly all but a few) come last, as they are
        positive = row_scores > 0
        ahead = rows[positive]
        ahead = ahead[order_desc(row_scores[positive])]  # ties: tie_break order (ahead keeps it)
        return np.concatenate([ahead, rows[~positive]])
    return rows[order_desc(row_scores)]  # ties: tie_break order (NaN too: order_desc sorts it as lexsort)


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


class _Loading:
    """A chat being read by one thread while others wait for it."""

    def __init__(self):
        self.done = threading.Event()
        self.index: ChatIndex | None = None
        self.error: BaseException | None = None
        self.stale = False  # invalidated meanwhile: answer the waiters, but do not keep it


class Retriever:
    """Searches one chat at a time over an ``IndexStore``; see the module doc for the variants.

    Chats are cached in memory, least recently used dropped first once their estimated size
    (``ChatIndex.nbytes``) passes ``cache_mb`` (default retrieval.toml ``[cache] max_mb``, else
    ``DEFAULT_CACHE_MB``); a chat larger than that is answered from a fresh read each time and
    not kept. At most every ``REFRESH_SECONDS`` the store's table versions are compared (~2 ms)
    and a re-indexed store drops the cache, so a long-lived retriever never serves rows older
    than that. Safe to share between threads (the API server does): a chat is loaded once however
    many queries wait for it, one chat at a time, and cached chats answer while another loads.
    """

    REFRESH_SECONDS = 2.0

    def __init__(self, store: IndexStore, embedder: Embedder, config: dict | None = None,
                 reranker: Reranker | None = None, *, cache_mb: float | None = None):
        self.store = store
        self.embedder = embedder
        self.config = config if config is not None else settings.load_config("retrieval")
        validate_config(self.config)
        self.default_variant = self.config["default_variant"]
        self.story_variant = self.config["story_variant"]
        if cache_mb is None:
            cache_mb = (self.config.get("cache") or {}).get("max_mb", DEFAULT_CACHE_MB)
        if isinstance(cache_mb, bool) or not isinstance(cache_mb, int | float) or not cache_mb > 0:
            raise ValueError(f"retrieval.toml: cache.max_mb must be a number > 0, got {cache_mb!r}")
        self.cache_bytes = int(cache_mb * 2**20)
        self._reranker = reranker
        self._learned: LearnedFusion | None = None
        self._chats: OrderedDict[str, ChatIndex] = OrderedDict()  # least recently used first
        self._cached_bytes = 0
        self._loading: dict[str, _Loading] = {}
        self._stats = {"hits": 0, "loads": 0, "evictions": 0, "not_kept": 0}
        self._load_seconds: dict[str, float] = {}
        self._versions: dict[str, int] = {}
        self._versions_checked = float("-inf")
        self._cache_lock = threading.Lock()
        self._load_lock = threading.Lock()  # one chat read at a time: one load's memory at a time

    # -- chat cache ---------------------------------------------------------------------------
    def chat_files(self) -> list[str]:
        return self.store.chat_files()

    def _drop(self, chat_file: str | None) -> None:
        """Forget one cached chat (or all); loads in flight are answered but not kept. Lock held."""
        names = list(self._chats) if chat_file is None else [chat_file]
        for name in names:
            index = self._chats.pop(name, None)
            if index is not None:
                self._cached_bytes -= index.nbytes
        for name in [n for n in self._loading if chat_file is None or n == chat_file]:
            self._loading.pop(name).stale = True  # the next query reads the chat afresh

    def invalidate(self, chat_file: str | None = None) -> None:
        """Forget the in-memory copy of one chat (or all), e.g. after it was re-indexed."""
        with self._cache_lock:
            self._drop(chat_file)

    def cache_info(self) -> dict:
        """What the chat cache holds: bytes (estimated) per chat, least recently used first,
        the bound, hits / loads / evictions / chats too large to keep, last load seconds."""
        with self._cache_lock:
            return {"max_bytes": self.cache_bytes, "bytes": self._cached_bytes,
                    "chats": {name: index.nbytes for name, index in self._chats.items()},
                    **self._stats, "load_seconds": {k: round(v, 3) for k, v in self._load_seconds.items()}}

    def chat(self, chat_file: str) -> ChatIndex:
        with self._cache_lock:
            now = time.monotonic()
            if now - self._versions_checked >= self.REFRESH_SECONDS:
                versions = self.store.versions()
                if versions != self._versions:
                    self._drop(None)
                    self._versions = versions
                self._versions_checked = now
            cached = self._chats.get(chat_file)
            if cached is not None:
                self._chats.move_to_end(chat_file)
                self._stats["hits"] += 1
                return cached
            loading = self._loading.get(chat_file)
            leader = loading is None
            if leader:
                loading = self._loading[chat_file] = _Loading()
        if not leader:
            loading.done.wait()
            if loading.error is not None:
                raise loading.error
            return loading.index
        try:
            with self._load_lock:
                loading.index = self._load(chat_file)
                release_free_memory()  # the load's temporaries
        except BaseException as exc:
            loading.error = exc
            raise
        finally:
            with self._cache_lock:
                if self._loading.get(chat_file) is loading:
                    del self._loading[chat_file]
                if loading.index is not None and not loading.stale:
                    self._keep(chat_file, loading.index)
            loading.done.set()
        return loading.index

    def _load(self, chat_file: str) -> ChatIndex:
        started = time.perf_counter()
        messages = self.store.messages_for(chat_file)
        if messages.height == 0:
            raise ValueError(f"unknown chat_file {chat_file!r}; indexed chat files: {self.chat_files()}")
        index = ChatIndex(
            chat_file, messages, self.store.blocks_for(chat_file), self.store.threads_for(chat_file),
            window=int(_option(self.config, "hybrid.window")), stem=bool(_option(self.config, "lexical.stem")))
        with self._cache_lock:
            self._stats["loads"] += 1
            self._load_seconds[chat_file] = time.perf_counter() - started
        return index

    def _keep(self, chat_file: str, index: ChatIndex) -> None:
        """Cache ``index`` and drop least recently used chats past the bound. Lock held."""
        if index.nbytes > self.cache_bytes:
            self._stats["not_kept"] += 1
            return
        self._chats[chat_file] = index
        self._cached_bytes += index.nbytes
        while self._cached_bytes > self.cache_bytes:
            _, dropped = self._chats.popitem(last=False)
            self._cached_bytes -= dropped.nbytes
            self._stats["evictions"] += 1

    def block_ids(self, chat_file: str, block_id: str) -> list[str]:
        """ALL local ids of a block, in order."""
        chat = self.chat(chat_file)
        if block_id not in chat.block_members:
            raise ValueError(f"{chat_file}: unknown block_id {block_id!r}")
        return expansion.block_range(chat.block_members[block_id])

    def messages(self, chat_file: str, local_ids: Sequence[str]) -> list[Hit]:
        """The messages with these local ids, in the given order (score 0)."""
        chat = self.chat(chat_file)
        unknown = [lid for lid in local_ids if lid not in chat.row_of]
        if unknown:
            raise ValueError(f"{chat_file}: unknown local ids {unknown[:5]}")
        return [chat.hit(chat.row_of[lid], 0.0, sources=["lookup"]) for lid in local_ids]

    def search_blocks(self, chat_file: str, query: str, k: int = 8, *, variant: str | None = None) -> list[BlockHit]:
        """The ``k`` best L1 blocks of ``chat_file`` for ``query`` (block_search.py), each with
        every message it holds; [] for a chat without blocks. A message scores by its rank in the
        ``variant`` search (default: the default variant; the candidate pool, then the other
        messages in hybrid order) as (rrf_k + 1) / (rrf_k + rank): 1 for the best, 0 for a message
        no list found."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        chat = self.chat(chat_file)
        if not chat.block_names:
            return []
        query, info, search_query = self._parse(chat, query)
        scores = QueryScores.batch(chat, [search_query], list(self.embedder.encode([search_query])))[0]
        pool, variant = self.pool_size, variant or self.default_variant
        hybrid = self._first_stage(chat, "hybrid", info, scores)  # the same for every hybrid variant
        ranked = self._search_one(chat, query, info, scores, pool, variant=variant, pool=pool, need_fresh=False,
                                  reranker=None, timings={"parse": 0.0, "encode": 0.0},
                                  first_stage=None if variant in ("bm25", "dense") else hybrid).hits
        pool_rows = np.array([chat.row_of[h.local_id] for h in ranked], dtype=np.int64)
        fused = hybrid[0]
        rows = np.concatenate([pool_rows, fused.order[~np.isin(fused.order, pool_rows)]])
        message_scores = np.zeros(chat.size)
        message_scores[rows] = (self.rrf_k + 1) / (self.rrf_k + 1 + np.arange(rows.size))
        order, block_scores, lists = block_search.rank_blocks(
            message_scores, chat.block_of, chat.block_bm25.scores(search_query),
            dense.cosine_scores(chat.block_vectors, scores.qvec), self.rrf_k)
        ranked_by = {name: set(blocks[:k].tolist()) for name, blocks in lists.items()}
        out = []
        for b, score in zip(order[:k].tolist(), block_scores[:k].tolist()):
            thread = int(chat.thread_of[b])
            out.append(BlockHit(
                block_id=chat.block_names[b], score=score,
                thread_id=chat.thread_names[thread] if thread >= 0 else None,
                members=[chat.hit(r, float(message_scores[r]), sources=["blocks"]) for r in sorted(chat.block_rows[b])],
                sources=[name for name, top in ranked_by.items() if b in top]))
        return out

    @property
    def reranker(self) -> Reranker | None:
        if self._reranker is None:
            self._reranker = make_reranker(_option(self.config, "rerank"))
        return self._reranker

    # -- search -------------------------------------------------------------------------------
    def _lexical(self, chat: ChatIndex, query: str) -> list[tuple[int, float]]:
        """(row, BM25 score) of the matching messages, best first, from the configured backend."""
        if self.config["lexical"]["backend"] == "lancedb":
            found = self.store.full_text_search("messages", chat.chat_file, query, limit=chat.size)
            return [(chat.row_of_message[mid], float(score)) for mid, score in found if mid in chat.row_of_message]
        return chat.bm25.search(query)

    def _lexical_rows(self, chat: ChatIndex, scores: QueryScores) -> np.ndarray:
        """The rows of ``_lexical``, as an array."""
        if self.config["lexical"]["backend"] == "lancedb":
            return np.array([r for r, _ in self._lexical(chat, scores.query)], dtype=np.int64)
        return positive_order(scores.bm25)[0].astype(np.int64)

    def _first_stage(self, chat: ChatIndex, variant: str, info: query_understanding.QueryInfo, scores: QueryScores
                     ) -> tuple[Sequence[tuple[int, float]], dict[int, list[str]], dict[str, np.ndarray]]:
        """Ranked (row, score) over the chat's messages for the query of ``scores``, the lists that
        found each row, and the hybrid lists themselves (empty for bm25 / dense). The hybrid
        ranking is a ``Fused``: slices from its start sort only the rows that can be in them."""
        if variant == "bm25":
            ranked = self._lexical(chat, scores.query)
            return ranked, {r: ["bm25"] for r, _ in ranked}, {}
        if variant == "dense":
            ranked = dense.top_k(scores.cosine)
            return ranked, {r: ["dense"] for r, _ in ranked}, {}
        lists = self.hybrid_lists(chat, info, scores)
        h = self.config["hybrid"]
        # The lists fused for the base order come first in ``lists``: their fusion is extended.
        fused = rrf_fuse(list(lists.values()), chat.size, [float(h[f"w_{n}"]) for n in lists], k=self.rrf_k,
                         start=scores.base)
        found: dict[int, list[str]] = {}
        for name, rows in lists.items():
            for r in rows[: self.pool_size].tolist():
                found.setdefault(r, []).append(name)
        return fused, found, lists

    def pool_features(self, chat: ChatIndex, info: query_understanding.QueryInfo, lists: Mapping[str, np.ndarray],
                      fused: Fused, pool: Sequence[int], scores: QueryScores) -> np.ndarray:
        """One row per ``pool`` row, one column per learned_fusion.FEATURES entry (in that order).

        Computed for the pool rows (and their neighbours) only: a list's ranks through one
        scatter, the per-message scores from ``scores`` (the ones the lists were built from)."""
        rows = np.asarray(pool, dtype=np.int64)
        columns: dict[str, np.ndarray] = {}
        for name, ranked_rows in lists.items():
            place = np.full(chat.size, -1, dtype=np.int64)
            place[ranked_rows] = np.arange(ranked_rows.size)
            at = place[rows]
            rr = np.zeros(rows.size)
            rr[at >= 0] = 1.0 / (self.rrf_k + (at[at >= 0] + 1))
            columns[f"rr_{name}"] = rr
        fused_score = fused.scores
        columns["fused"] = fused_score[rows]
        columns["fused_prev"] = np.where(rows > 0, fused_score[np.maximum(rows - 1, 0)], 0.0)
        columns["fused_next"] = np.where(rows < chat.size - 1, fused_score[np.minimum(rows + 1, chat.size - 1)], 0.0)
        values = {}
        for name, full in (("bm25", scores.bm25), ("bm25_window", scores.bm25_window)):
            best = full.max()
            values[name] = (lambda idx, full=full, best=best: full[idx] / best) if best > 0 else full.__getitem__
        values["cosine"] = scores.cosine.__getitem__
        values["cosine_window"] = scores.cosine_window.__getitem__
        for name, value_at in values.items():
            columns[name] = value_at(rows)
        for name in ("cosine", "bm25"):
            near1 = neighbour_max_at(values[name], chat.session_array, rows, 1)
            columns[f"{name}_near1"] = near1
            columns[f"{name}_near2"] = np.maximum(near1, neighbour_max_at(values[name], chat.session_array, rows, 2))
        columns["speaker_named"] = (chat.speaker_mask(info.persons, rows).astype(np.float64)
                                    if info.persons else np.zeros(rows.size))
        columns["log_words"] = chat.log_words[rows]
        columns["is_question"] = chat.is_question[rows]
        columns["after_question"] = chat.after_question[rows]
        columns["first_person"] = chat.first_person[rows] * float(info.question_type not in FACT_SLOT_TYPES)
        columns["tier"] = chat.tier_array[rows]
        columns["refs"] = chat.refs_array[rows]
        columns["temporal"] = chat.temporal[rows]
        columns["when_x_temporal"] = chat.temporal[rows] * float(info.question_type == "when")
        out = np.empty((rows.size, len(FEATURES)))
        for j, name in enumerate(FEATURES):
            if name == "pool_rank":
                out[:, j] = 1.0 / np.sqrt(np.arange(1, rows.size + 1))
            elif name.startswith("rr_") and name not in columns:
                out[:, j] = 0.0  # that list was not built for this question (e.g. no speaker named)
            else:
                out[:, j] = columns[name]
        return out

    @property
    def learned(self) -> LearnedFusion:
        if self._learned is None:
            if "learned" not in self.config:
                raise ValueError("retrieval.toml: no [learned] section (run benchmarks/train_fusion.py --write)")
            self._learned = LearnedFusion.from_config(self.config["learned"])
        return self._learned

    def hybrid_lists(self, chat: ChatIndex, info: query_understanding.QueryInfo,
                     scores: QueryScores) -> dict[str, np.ndarray]:
        """The ranked row lists the hybrid variants fuse, by name (``hybrid.w_<name>`` weighs each),
        for the query of ``scores``; sets ``scores.base``, the fusion of the lists before the
        ones ordered by it."""
        h = self.config["hybrid"]
        query, qvec = scores.query, scores.qvec
        lists: dict[str, np.ndarray] = {"bm25": self._lexical_rows(chat, scores), "dense": _ranking(scores.cosine)}
        if h["w_bm25_window"] > 0:
            lists["bm25_window"] = positive_order(scores.bm25_window)[0].astype(np.int64)
        if h["w_dense_window"] > 0:
            lists["dense_window"] = _ranking(scores.cosine_window)
        scores.base = rrf_fuse(list(lists.values()), chat.size, [float(h[f"w_{n}"]) for n in lists], k=self.rrf_k)
        base_order = scores.base.order
        if h["w_block"] > 0 and chat.block_names:
            lists["block"] = _spread(dense.cosine_scores(chat.block_vectors, qvec), chat.block_of, base_order)
        if h["w_block_bm25"] > 0 and chat.block_names:
            lists["block_bm25"] = _spread(chat.block_bm25.scores(query), chat.block_of, base_order)
        if h["w_thread"] > 0 and chat.thread_names:
            row_thread = np.where(chat.block_of >= 0, chat.thread_of[np.maximum(chat.block_of, 0)], -1)
            lists["thread"] = _spread(dense.cosine_scores(chat.thread_vectors, qvec), row_thread, base_order)
        if h["w_speaker"] > 0 and info.persons and len(info.persons) < len(chat.speaker_names):
            lists["speaker"] = base_order[chat.speaker_mask(info.persons, base_order)]
        if h["w_time"] > 0 and info.has_time:
            mask = query_understanding.time_mask(chat.times, info, timedelta(hours=h["time_slack_hours"]))
            if mask.any() and not mask.all():
                lists["time"] = base_order[mask[base_order]]
        return lists

    @property
    def rrf_k(self) -> int:
        return int(_option(self.config, "rrf_k"))

    @property
    def pool_size(self) -> int:
        return int(_option(self.config, "candidates"))

    def search(
        self,
        chat_file: str,
        query: str,
        k: int = 10,
        *,
        variant: str | None = None,
        candidates: int | None = None,
        need_fresh: bool = False,
        reranker: Reranker | None = None,
    ) -> SearchResult:
        """The ``k`` best messages of ``chat_file`` for ``query``, with the trace of how.

        ``candidates``: size of the first-stage pool kept for expansion / reranking and traced
        (default ``retrieval.toml`` ``candidates``); ``need_fresh``: favour recent messages in
        the hybrid-score reranker; ``reranker`` overrides the configured one for this call.
        """
        return self.search_many(chat_file, [query], k, variant=variant, candidates=candidates,
                                need_fresh=need_fresh, reranker=reranker)[0]

    def search_many(
        self,
        chat_file: str,
        queries: list[str],
        k: int = 10,
        *,
        variant: str | None = None,
        candidates: int | None = None,
        need_fresh: bool = False,
        reranker: Reranker | None = None,
    ) -> list[SearchResult]:
        """``search`` for each query, their vectors encoded in one batch (a forward pass over
        several short queries costs little more than over one)."""
        variant = variant or self.default_variant
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; known: {list(VARIANTS)}")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if not queries:
            return []
        t0 = time.perf_counter()
        chat = self.chat(chat_file)
        parsed = [self._parse(chat, query) for query in queries]
        parse_ms = (time.perf_counter() - t0) * 1000 / len(queries)
        texts = [search_query for _, _, search_query in parsed]
        t = time.perf_counter()
        vectors: list[np.ndarray | None] = [None] * len(queries)
        if variant != "bm25":
            vectors = list(self.embedder.encode(texts))
        encode_ms = (time.perf_counter() - t) * 1000 / len(queries)
        scores = QueryScores.batch(chat, texts, vectors)
        return [
            self._search_one(chat, query, info, query_scores, k, variant=variant,
                             pool=max(k, candidates or self.pool_size), need_fresh=need_fresh,
                             reranker=reranker, timings={"parse": parse_ms, "encode": encode_ms})
            for (query, info, _), query_scores in zip(parsed, scores)
        ]

    def _parse(self, chat: ChatIndex, query: str) -> tuple[str, query_understanding.QueryInfo, str]:
        """(query, what it asks about, the text the content lists search)."""
        info = chat.parse(query)
        search_query = query
        if self.config["hybrid"]["strip_person_names"] and info.persons:
            search_query = query_understanding.without_persons(query, chat.speaker_names, chat.aliases) or query
        return query, info, search_query

    def training_pools(self, chat_file: str, queries: list[str]) -> list[tuple[list[str], np.ndarray]]:
        """For each query, the local ids of its hybrid candidate pool (hybrid order) and their
        learned-fusion features: the rows benchmarks/train_fusion.py learns from."""
        chat = self.chat(chat_file)
        parsed = [self._parse(chat, query) for query in queries]
        texts = [search_query for _, _, search_query in parsed]
        batch = QueryScores.batch(chat, texts, list(self.embedder.encode(texts)))
        out = []
        for (_, info, _), scores in zip(parsed, batch):
            fused, _, lists = self._first_stage(chat, "hybrid", info, scores)
            rows = [r for r, _ in fused[: self.pool_size]]
            out.append(([chat.local_ids[r] for r in rows], self.pool_features(chat, info, lists, fused, rows, scores)))
        return out

    def _search_one(self, chat: ChatIndex, query: str, info: query_understanding.QueryInfo, scores: QueryScores,
                    k: int, *, variant: str, pool: int, need_fresh: bool, reranker: Reranker | None,
                    timings: dict[str, float], first_stage: tuple | None = None) -> SearchResult:
        """``search`` of ``query``, whose search text (``_parse``) and vector are those of ``scores``;
        ``first_stage``: ``_first_stage``'s result for this variant, when the caller has it."""
        search_query, qvec = scores.query, scores.qvec
        t0 = time.perf_counter()
        t = time.perf_counter()
        ranked, found, lists = first_stage or self._first_stage(chat, variant, info, scores)
        extra: dict[str, object] = {}
        if variant == "dual_path":
            tree_cfg = _option(self.config, "tree")
            block_rank = (dense.top_k(dense.cosine_scores(chat.block_vectors, qvec))
                          if chat.block_names else [])
            thread_rank = (dense.top_k(dense.cosine_scores(chat.thread_vectors, qvec))
                           if chat.thread_names else [])
            result = tree.dual_path(
                ranked, block_rank, thread_rank, block_of=chat.block_of, thread_blocks=chat.thread_blocks,
                anchors=int(tree_cfg["anchors"]), k_global=int(tree_cfg["k_global"]),
                density_threshold=float(tree_cfg["density_threshold"]),
                exploit_weights=tuple(tree_cfg["exploit_weights"]),
                explore_weights=tuple(tree_cfg["explore_weights"]), rrf_k=self.rrf_k)
            ranked = result.ranked
            for r, paths in result.path.items():
                found.setdefault(r, []).extend(paths)
            extra["tree"] = {"mode": result.mode, "active_blocks": [chat.block_names[b] for b in result.active_blocks]}
        pool_ranked = ranked[:pool]
        timings["first_stage"] = (time.perf_counter() - t) * 1000

        second = pool_ranked
        if variant == "hybrid_learned":
            t = time.perf_counter()
            rows = [r for r, _ in pool_ranked]
            x = self.pool_features(chat, info, lists, ranked, rows, scores)
            model = self.learned
            learned = model.score(x[:, [list(FEATURES).index(f) for f in model.features]])
            # Reported as softmax weight relative to the pool's best, in (0, 1], which the agent's
            # grades read as relative scores.
            relative = np.exp((learned - learned.max()) / LEARNED_SCORE_TEMPERATURE)
            second = [(rows[i], float(relative[i])) for i in _ranking(learned)]
            timings["learned"] = (time.perf_counter() - t) * 1000

        t = time.perf_counter()
        expanded_by: dict[int, str] = {}
        if variant in ("hybrid_expand", "hybrid_expand_rerank"):
            e = _option(self.config, "expand")
            second, expanded_by = expansion.expand(
                pool_ranked, chat.size, seeds=int(e["seeds"]), before=int(e["before"]), after=int(e["after"]),
                decay=float(e["decay"]), block_of=chat.block_of, block_rows=chat.block_rows,
                block_decay=float(e["block_decay"]))
        timings["expand"] = (time.perf_counter() - t) * 1000

        hits = [
            chat.hit(r, s, {"retrieval": s}, found.get(r, []) + ([expanded_by[r]] if r in expanded_by else []))
            for r, s in second
        ]
        t = time.perf_counter()
        if variant == "hybrid_expand_rerank":
            chosen = reranker or self.reranker
            if chosen is not None:
                context = RerankContext(last_time=chat.end, refs=chat.refs, tiers=chat.tiers, need_fresh=need_fresh)
                hits = chosen.rerank(query, hits, context)
                extra["reranker"] = chosen.name
        timings["rerank"] = (time.perf_counter() - t) * 1000
        timings["total"] = timings["parse"] + timings["encode"] + (time.perf_counter() - t0) * 1000

        trace = SearchTrace(
            candidates=[(chat.local_ids[r], s) for r, s in pool_ranked],
            reranked=[(h.local_id, h.score) for h in hits],
        )
        query_info = {**info.to_dict(), "variant": variant, "search_query": search_query, **extra}
        return SearchResult(hits=hits[:k], trace=trace, query_info=query_info, timings_ms=timings)
