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
memory (chats are small), so a query costs one query encode plus numpy work.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
import polars as pl

from narrative_mirror import settings
from narrative_mirror.embedding import Embedder
from narrative_mirror.index_store import IndexStore
from narrative_mirror.retrieval import dense, expansion, query_understanding, tree
from narrative_mirror.retrieval.learned_fusion import FEATURES, LearnedFusion, neighbour_max
from narrative_mirror.retrieval.fusion import rrf_rows
from narrative_mirror.retrieval.lexical import BM25Index
from narrative_mirror.retrieval.rerank import Reranker, RerankContext, make_reranker

VARIANTS = ("bm25", "dense", "hybrid", "hybrid_learned", "hybrid_expand", "hybrid_expand_rerank", "dual_path")
# Softens the learned scores the agent grades with. Agent on train (498 q), exact recall /
# precision of the selected evidence: 1.0 -> fast .486/.410, balanced .517/.248; 2.0 -> fast
# .511/.388, balanced .547/.227; the hybrid variant: fast .489/.229, balanced .571/.174.
LEARNED_SCORE_TEMPERATURE = 2.0


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
        self.speaker_array = np.array(self.speakers, dtype=object)
        self.raw_texts: list[str] = messages["raw_text"].to_list()
        self.texts: list[str] = messages["text"].to_list()
        self.timestamps: list[datetime] = messages["timestamp"].to_list()
        self.times = messages["timestamp"].to_numpy().astype("datetime64[us]")
        self.block_ids: list[str | None] = messages["block_id"].to_list()
        self.refs = dict(zip(self.local_ids, messages["refs"].to_list()))
        self.tiers = dict(zip(self.local_ids, messages["importance_tier"].to_list()))
        self.row_of = {lid: i for i, lid in enumerate(self.local_ids)}
        self.row_of_message = {mid: i for i, mid in enumerate(self.message_ids)}
        self.vectors = np.asarray(messages["vector"].to_numpy(), dtype=np.float32)
        # Per-message arrays the learned fusion reads (learned_fusion.FEATURES).
        self.session_array = np.array(self.sessions, dtype=np.int64)
        self.log_words = np.log1p([len(t.split()) for t in self.raw_texts])
        self.is_question = np.array(["?" in t for t in self.raw_texts], dtype=np.float64)
        self.after_question = np.concatenate([[0.0], self.is_question[:-1]])
        self.tier_array = np.array(messages["importance_tier"].to_list(), dtype=np.float64)
        self.refs_array = np.array(messages["refs"].to_list(), dtype=np.float64)
        self.temporal = np.array([bool(t) for t in messages["temporal"].to_list()], dtype=np.float64)

        windows = _window_rows(self.size, window)
        self.bm25 = BM25Index(self.texts, stem=stem)
        self.window_bm25 = BM25Index([" ".join(self.texts[j] for j in w) for w in windows], stem=stem)
        self.window_vectors = dense.normalize_rows(np.stack([self.vectors[list(w)].mean(axis=0) for w in windows]))

        self.block_names: list[str] = blocks["block_id"].to_list() if blocks.height else []
        block_number = {b: i for i, b in enumerate(self.block_names)}
        self.block_members: dict[str, list[str]] = (
            dict(zip(self.block_names, blocks["message_ids"].to_list())) if blocks.height else {})
        self.block_of = np.array([block_number.get(b, -1) if b else -1 for b in self.block_ids], dtype=np.int64)
        self.block_rows = {
            i: [self.row_of[lid] for lid in self.block_members[b] if lid in self.row_of]
            for i, b in enumerate(self.block_names)
        }
        self.block_vectors = (np.asarray(blocks["vector"].to_numpy(), dtype=np.float32)
                              if blocks.height else np.zeros((0, self.vectors.shape[1]), np.float32))
        self.block_bm25 = BM25Index(
            [" ".join([t] + [self.texts[r] for r in self.block_rows[i]])
             for i, t in enumerate(blocks["text"].to_list() if blocks.height else [])], stem=stem)

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
        self.aliases = query_understanding.speaker_aliases(speaker_texts)
        self.entities = sorted({e for row in messages["entities"].to_list() for e in (row or [])})
        self.start, self.end = min(self.timestamps), max(self.timestamps)

    def parse(self, query: str) -> query_understanding.QueryInfo:
        return query_understanding.parse_query(
            query, speakers=self.speaker_names, aliases=self.aliases, known_entities=self.entities,
            chat_start=self.start, chat_end=self.end)

    def hit(self, row: int, score: float, reasons: dict[str, float] | None = None,
            sources: list[str] | None = None) -> Hit:
        return Hit(
            local_id=self.local_ids[row], message_id=self.message_ids[row], position=self.positions[row],
            session=self.sessions[row], speaker=self.speakers[row], text=self.raw_texts[row],
            timestamp=self.timestamps[row], score=float(score), reasons=dict(reasons or {}),
            sources=list(sources or []), block_id=self.block_ids[row])


def _ranking(scores: np.ndarray) -> np.ndarray:
    """All rows, best score first (ties: lower row first)."""
    rows = np.arange(scores.shape[0])
    return rows[np.lexsort((rows, -scores))]


def _spread(group_scores: np.ndarray, group_of: np.ndarray, tie_break: np.ndarray) -> np.ndarray:
    """Rows ranked by their group's score (rows in no group left out), ties in ``tie_break`` order."""
    if group_scores.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    rows = tie_break[group_of[tie_break] >= 0]
    return rows[np.lexsort((np.arange(rows.size), -group_scores[group_of[rows]]))]


class Retriever:
    """Searches one chat at a time over an ``IndexStore``; see the module doc for the variants.

    Chats are cached in memory; at most every ``REFRESH_SECONDS`` the store's table versions
    are compared (~2 ms) and a re-indexed store drops the cache, so a long-lived retriever
    never serves rows older than that. Safe to share between threads (the API server does):
    one lock guards the cache, so a chat is loaded once however many queries wait for it.
    """

    REFRESH_SECONDS = 2.0

    def __init__(self, store: IndexStore, embedder: Embedder, config: dict | None = None,
                 reranker: Reranker | None = None):
        self.store = store
        self.embedder = embedder
        self.config = config if config is not None else settings.load_config("retrieval")
        validate_config(self.config)
        self.default_variant = self.config["default_variant"]
        self.story_variant = self.config["story_variant"]
        self._reranker = reranker
        self._learned: LearnedFusion | None = None
        self._chats: dict[str, ChatIndex] = {}
        self._versions: dict[str, int] = {}
        self._versions_checked = float("-inf")
        self._cache_lock = threading.Lock()

    # -- chat cache ---------------------------------------------------------------------------
    def chat_files(self) -> list[str]:
        return self.store.chat_files()

    def invalidate(self, chat_file: str | None = None) -> None:
        """Forget the in-memory copy of one chat (or all), e.g. after it was re-indexed."""
        with self._cache_lock:
            if chat_file is None:
                self._chats.clear()
            else:
                self._chats.pop(chat_file, None)

    def chat(self, chat_file: str) -> ChatIndex:
        with self._cache_lock:
            now = time.monotonic()
            if now - self._versions_checked >= self.REFRESH_SECONDS:
                versions = self.store.versions()
                if versions != self._versions:
                    self._chats.clear()
                    self._versions = versions
                self._versions_checked = now
            if chat_file not in self._chats:
                messages = self.store.messages_for(chat_file)
                if messages.height == 0:
                    raise ValueError(f"unknown chat_file {chat_file!r}; indexed chat files: {self.chat_files()}")
                self._chats[chat_file] = ChatIndex(
                    chat_file, messages, self.store.blocks_for(chat_file), self.store.threads_for(chat_file),
                    window=int(_option(self.config, "hybrid.window")), stem=bool(_option(self.config, "lexical.stem")))
            return self._chats[chat_file]

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

    def _first_stage(self, chat: ChatIndex, query: str, qvec: np.ndarray | None, variant: str,
                     info: query_understanding.QueryInfo
                     ) -> tuple[list[tuple[int, float]], dict[int, list[str]], dict[str, np.ndarray]]:
        """Ranked (row, score) over the chat's messages, the lists that found each row, and the
        hybrid lists themselves (empty for bm25 / dense)."""
        if variant == "bm25":
            ranked = self._lexical(chat, query)
            return ranked, {r: ["bm25"] for r, _ in ranked}, {}
        if variant == "dense":
            ranked = dense.top_k(dense.cosine_scores(chat.vectors, qvec))
            return ranked, {r: ["dense"] for r, _ in ranked}, {}
        lists = self.hybrid_lists(chat, query, qvec, info)
        h = self.config["hybrid"]
        fused = rrf_rows(list(lists.values()), chat.size, [float(h[f"w_{n}"]) for n in lists], k=self.rrf_k)
        found: dict[int, list[str]] = {}
        for name, rows in lists.items():
            for r in rows[: self.pool_size].tolist():
                found.setdefault(r, []).append(name)
        return fused, found, lists

    def pool_features(self, chat: ChatIndex, query: str, qvec: np.ndarray, info: query_understanding.QueryInfo,
                      lists: Mapping[str, np.ndarray], fused: Sequence[tuple[int, float]],
                      pool: Sequence[int]) -> np.ndarray:
        """One row per ``pool`` row, one column per learned_fusion.FEATURES entry (in that order)."""
        columns: dict[str, np.ndarray] = {}
        for name, ranked_rows in lists.items():
            rr = np.zeros(chat.size)
            rr[ranked_rows] = 1.0 / (self.rrf_k + np.arange(1, ranked_rows.size + 1))
            columns[f"rr_{name}"] = rr
        fused_score = np.zeros(chat.size)
        fused_score[[r for r, _ in fused]] = [s for _, s in fused]
        columns["fused"] = fused_score
        columns["fused_prev"] = np.concatenate([[0.0], fused_score[:-1]])
        columns["fused_next"] = np.concatenate([fused_score[1:], [0.0]])
        bm25 = chat.bm25.scores(query)
        columns["bm25"] = bm25 / bm25.max() if bm25.max() > 0 else bm25
        window_bm25 = chat.window_bm25.scores(query)
        columns["bm25_window"] = window_bm25 / window_bm25.max() if window_bm25.max() > 0 else window_bm25
        columns["cosine"] = dense.cosine_scores(chat.vectors, qvec)
        columns["cosine_window"] = dense.cosine_scores(chat.window_vectors, qvec)
        for name, values in (("cosine", columns["cosine"]), ("bm25", columns["bm25"])):
            near1 = neighbour_max(values, chat.session_array, 1)
            columns[f"{name}_near1"] = near1
            columns[f"{name}_near2"] = np.maximum(near1, neighbour_max(values, chat.session_array, 2))
        columns["speaker_named"] = (np.isin(chat.speaker_array, info.persons).astype(np.float64)
                                    if info.persons else np.zeros(chat.size))
        columns["log_words"] = chat.log_words
        columns["is_question"] = chat.is_question
        columns["after_question"] = chat.after_question
        columns["tier"] = chat.tier_array
        columns["refs"] = chat.refs_array
        columns["temporal"] = chat.temporal
        columns["when_x_temporal"] = chat.temporal * float(info.question_type == "when")
        rows = np.asarray(pool, dtype=np.int64)
        out = np.empty((rows.size, len(FEATURES)))
        for j, name in enumerate(FEATURES):
            if name == "pool_rank":
                out[:, j] = 1.0 / np.sqrt(np.arange(1, rows.size + 1))
            elif name.startswith("rr_") and name not in columns:
                out[:, j] = 0.0  # that list was not built for this question (e.g. no speaker named)
            else:
                out[:, j] = columns[name][rows]
        return out

    @property
    def learned(self) -> LearnedFusion:
        if self._learned is None:
            if "learned" not in self.config:
                raise ValueError("retrieval.toml: no [learned] section (run benchmarks/train_fusion.py --write)")
            self._learned = LearnedFusion.from_config(self.config["learned"])
        return self._learned

    def hybrid_lists(self, chat: ChatIndex, query: str, qvec: np.ndarray,
                     info: query_understanding.QueryInfo) -> dict[str, np.ndarray]:
        """The ranked row lists the hybrid variants fuse, by name (``hybrid.w_<name>`` weighs each)."""
        h = self.config["hybrid"]
        msg_dense = dense.cosine_scores(chat.vectors, qvec)
        lexical = np.array([r for r, _ in self._lexical(chat, query)], dtype=np.int64)
        lists: dict[str, np.ndarray] = {"bm25": lexical, "dense": _ranking(msg_dense)}
        if h["w_bm25_window"] > 0:
            lists["bm25_window"] = np.array([r for r, _ in chat.window_bm25.search(query)], dtype=np.int64)
        if h["w_dense_window"] > 0:
            lists["dense_window"] = _ranking(dense.cosine_scores(chat.window_vectors, qvec))
        base = rrf_rows(list(lists.values()), chat.size, [float(h[f"w_{n}"]) for n in lists], k=self.rrf_k)
        base_order = np.array([r for r, _ in base], dtype=np.int64)
        if h["w_block"] > 0 and chat.block_names:
            lists["block"] = _spread(dense.cosine_scores(chat.block_vectors, qvec), chat.block_of, base_order)
        if h["w_block_bm25"] > 0 and chat.block_names:
            lists["block_bm25"] = _spread(chat.block_bm25.scores(query), chat.block_of, base_order)
        if h["w_thread"] > 0 and chat.thread_names:
            row_thread = np.where(chat.block_of >= 0, chat.thread_of[np.maximum(chat.block_of, 0)], -1)
            lists["thread"] = _spread(dense.cosine_scores(chat.thread_vectors, qvec), row_thread, base_order)
        if h["w_speaker"] > 0 and info.persons and len(info.persons) < len(chat.speaker_names):
            lists["speaker"] = base_order[np.isin(chat.speaker_array[base_order], info.persons)]
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
        t = time.perf_counter()
        vectors: list[np.ndarray | None] = [None] * len(queries)
        if variant != "bm25":
            vectors = list(self.embedder.encode([search_query for _, _, search_query in parsed]))
        encode_ms = (time.perf_counter() - t) * 1000 / len(queries)
        return [
            self._search_one(chat, query, info, search_query, qvec, k, variant=variant,
                             pool=max(k, candidates or self.pool_size), need_fresh=need_fresh,
                             reranker=reranker, timings={"parse": parse_ms, "encode": encode_ms})
            for (query, info, search_query), qvec in zip(parsed, vectors)
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
        vectors = self.embedder.encode([search_query for _, _, search_query in parsed])
        out = []
        for (_, info, search_query), qvec in zip(parsed, vectors):
            fused, _, lists = self._first_stage(chat, search_query, qvec, "hybrid", info)
            rows = [r for r, _ in fused[: self.pool_size]]
            out.append(([chat.local_ids[r] for r in rows],
                        self.pool_features(chat, search_query, qvec, info, lists, fused, rows)))
        return out

    def _search_one(self, chat: ChatIndex, query: str, info: query_understanding.QueryInfo, search_query: str,
                    qvec: np.ndarray | None, k: int, *, variant: str, pool: int, need_fresh: bool,
                    reranker: Reranker | None, timings: dict[str, float]) -> SearchResult:
        t0 = time.perf_counter()
        t = time.perf_counter()
        ranked, found, lists = self._first_stage(chat, search_query, qvec, variant, info)
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
            x = self.pool_features(chat, search_query, qvec, info, lists, ranked, rows)
            model = self.learned
            scores = model.score(x[:, [list(FEATURES).index(f) for f in model.features]])
            # Reported as softmax weight relative to the pool's best, in (0, 1], which the agent's
            # grades read as relative scores.
            relative = np.exp((scores - scores.max()) / LEARNED_SCORE_TEMPERATURE)
            second = [(rows[i], float(relative[i])) for i in _ranking(scores)]
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
