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
memory (``chat_index.ChatIndex``, cached by ``chat_cache.ChatCache``: least recently used chats
are dropped past ``[cache] max_mb`` of estimated memory), so a query costs one query encode plus
numpy work.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import numpy as np

from narrative_mirror import settings
from narrative_mirror.embedding import Embedder
from narrative_mirror.home import Home
from narrative_mirror.index_store import IndexStore
from narrative_mirror.retrieval import block_search, dense, expansion, query_names, query_understanding, tree
from narrative_mirror.retrieval.chat_cache import DEFAULT_CACHE_MB, ChatCache
from narrative_mirror.retrieval.chat_index import ChatIndex, QueryScores
from narrative_mirror.retrieval.config import VARIANTS, option, validate_config
from narrative_mirror.retrieval.fusion import rrf_fuse
from narrative_mirror.retrieval.hybrid import hybrid_lists, ranking
from narrative_mirror.retrieval.learned_fusion import FEATURES, LearnedFusion
from narrative_mirror.retrieval.lexical import positive_order
from narrative_mirror.retrieval.message_lookup import MessageLookup
from narrative_mirror.retrieval.pool_features import pool_features
from narrative_mirror.retrieval.ram_use import counted_search
from narrative_mirror.retrieval.records import BlockHit, RankTrace, SearchResult
from narrative_mirror.retrieval.rerank import HybridScoreReranker, RerankContext, Reranker, make_reranker


class Retriever(MessageLookup):
    """Searches one chat at a time over an ``IndexStore``; see the module doc for the variants.

    Chats are cached in memory (``ChatCache``) up to ``cache_mb`` of estimated size (default
    retrieval.toml ``[cache] max_mb``, else ``DEFAULT_CACHE_MB``). Safe to share between threads
    (the API server does).
    """

    def __init__(
        self,
        store: IndexStore,
        embedder: Embedder,
        config: dict | None = None,
        reranker: Reranker | None = None,
        *,
        cache_mb: float | None = None,
        home: Home | None = None,
    ):
        self.store = store
        self.home = home  # the home whose memory this is (its stored layers, its model cache); None: none
        self.embedder = embedder
        self.config = config if config is not None else settings.load_config("retrieval")
        validate_config(self.config)
        self.default_variant = self.config["default_variant"]
        self.story_variant = self.config["story_variant"]
        if cache_mb is None:
            cache_mb = (self.config.get("cache") or {}).get("max_mb", DEFAULT_CACHE_MB)
        if isinstance(cache_mb, bool) or not isinstance(cache_mb, int | float) or not cache_mb > 0:
            raise ValueError(f"retrieval.toml: cache.max_mb must be a number > 0, got {cache_mb!r}")
        self._reranker = reranker
        self._learned: LearnedFusion | None = None
        self.cache = ChatCache(store, self._read, int(cache_mb * 2**20))

    # -- the chats in memory --------------------------------------------------------------------
    def chat_files(self) -> list[str]:
        return self.store.chat_files()

    def invalidate(self, chat_file: str | None = None) -> None:
        """Forget the in-memory copy of one chat (or all), e.g. after it was re-indexed."""
        self.cache.invalidate(chat_file)

    def cache_info(self) -> dict:
        """What the chat cache holds (``ChatCache.info``)."""
        return self.cache.info()

    def chat(self, chat_file: str) -> ChatIndex:
        """The chat's in-memory index, read from the store when it is not cached."""
        return self.cache.get(chat_file)

    def _read(self, chat_file: str) -> ChatIndex:
        messages = self.store.messages_for(chat_file)
        if messages.height == 0:
            raise ValueError(f"unknown chat_file {chat_file!r}; indexed chat files: {self.chat_files()}")
        return ChatIndex(
            chat_file,
            messages,
            self.store.blocks_for(chat_file),
            self.store.threads_for(chat_file),
            window=int(option(self.config, "hybrid.window")),
            stem=bool(option(self.config, "lexical.stem")),
        )

    # -- search -------------------------------------------------------------------------------

    def search_blocks(self, chat_file: str, query: str, k: int = 8, *, variant: str | None = None) -> list[BlockHit]:
        """The ``k`` best L1 blocks of ``chat_file`` for ``query`` (block_search.py), each with
        every message it holds; [] for a chat without blocks. Messages rank by the ``variant``
        search (default: the default variant): its candidate pool, then the others in hybrid order."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        chat = self.chat(chat_file)
        if not chat.block_names:
            return []
        query, info, search_query = self._parse(chat, query)
        scores = QueryScores.batch(chat, [search_query], list(self.embedder.encode([search_query])))[0]
        pool, variant = self.pool_size, variant or self.default_variant
        hybrid = self._first_stage(chat, "hybrid", info, scores)  # the same for every hybrid variant
        ranked = self._search_one(
            chat,
            query,
            info,
            scores,
            pool,
            variant=variant,
            pool=pool,
            need_fresh=False,
            reranker=None,
            timings={"parse": 0.0, "encode": 0.0},
            first_stage=None if variant in ("bm25", "dense") else hybrid,
        ).hits
        pool_rows = np.array([chat.row_of[h.local_id] for h in ranked], dtype=np.int64)
        return block_search.search_blocks(chat, pool_rows, hybrid[0].order, search_query, scores.qvec, self.rrf_k, k)

    @property
    def fresh_reranker(self) -> Reranker:
        """The seed-004 hybrid score of retrieval.toml [rerank.hybrid_score], for need_fresh searches."""
        return HybridScoreReranker(**option(self.config, "rerank").get("hybrid_score", {}))

    @property
    def reranker(self) -> Reranker | None:
        if self._reranker is None:
            models = self.home.models if self.home is not None else None
            self._reranker = make_reranker(option(self.config, "rerank"), models_dir=models)
        return self._reranker

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

    def _first_stage(
        self, chat: ChatIndex, variant: str, info: query_understanding.QueryInfo, scores: QueryScores
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
        h = self.config["hybrid"]
        lists = hybrid_lists(chat, info, scores, self._lexical_rows(chat, scores), h, self.rrf_k)
        # The lists fused for the base order come first in ``lists``: their fusion is extended.
        fused = rrf_fuse(
            list(lists.values()), chat.size, [float(h[f"w_{n}"]) for n in lists], k=self.rrf_k, start=scores.base
        )
        found: dict[int, list[str]] = {}
        for name, rows in lists.items():
            for r in rows[: self.pool_size].tolist():
                found.setdefault(r, []).append(name)
        return fused, found, lists

    @property
    def learned(self) -> LearnedFusion:
        if self._learned is None:
            if "learned" not in self.config:
                raise ValueError("retrieval.toml: no [learned] section (run benchmarks/train_fusion.py --write)")
            self._learned = LearnedFusion.from_config(self.config["learned"])
        return self._learned

    @property
    def rrf_k(self) -> int:
        return int(option(self.config, "rrf_k"))

    @property
    def pool_size(self) -> int:
        return int(option(self.config, "candidates"))

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
        return self.search_many(
            chat_file, [query], k, variant=variant, candidates=candidates, need_fresh=need_fresh, reranker=reranker
        )[0]

    @counted_search
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
        if variant == "iterative":
            return [self._iterative(chat_file, query, k) for query in queries]
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
            self._search_one(
                chat,
                query,
                info,
                query_scores,
                k,
                variant=variant,
                pool=max(k, candidates or self.pool_size),
                need_fresh=need_fresh,
                reranker=reranker,
                timings={"parse": parse_ms, "encode": encode_ms},
            )
            for (query, info, _), query_scores in zip(parsed, scores)
        ]

    def _iterative(self, chat_file: str, query: str, k: int) -> SearchResult:
        """The tree-retrieval design's loop (retrieval/iterative.py) as a variant: its fused ranking as hits."""
        from narrative_mirror.retrieval.iterative import iterative_search

        t0 = time.perf_counter()
        loop = self.config.get("iterative", {})
        base = loop.get("base_variant", "hybrid_learned")
        ranked, trace = iterative_search(
            self,
            chat_file,
            query,
            k,
            rounds=int(loop.get("rounds", 3)),
            rewrite_every=int(loop.get("rewrite_every", 1)),
            n_blocks=int(loop.get("n_blocks", 2)),
            leaf=int(loop.get("leaf", 5)),
            variant=base if base != "iterative" else "hybrid_learned",
            rrf_k=self.rrf_k,
        )
        hits = [
            dataclasses.replace(h, score=1.0 / (i + 1), sources=["iterative"])
            for i, h in enumerate(self.messages(chat_file, ranked))
        ]
        ranks = [(h.local_id, h.score) for h in hits]
        return SearchResult(
            hits=hits,
            trace=RankTrace(candidates=ranks, reranked=ranks),
            query_info={"variant": "iterative", "queries": trace.queries},
            timings_ms={"total": (time.perf_counter() - t0) * 1000},
        )

    def _parse(self, chat: ChatIndex, query: str) -> tuple[str, query_understanding.QueryInfo, str]:
        """(query, what it asks about, the text the content lists search)."""
        info = chat.parse(query)
        search_query = query
        if self.config["hybrid"]["strip_person_names"] and info.persons:
            search_query = query_names.without_persons(query, chat.speaker_names, chat.aliases) or query
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
            out.append(
                ([chat.local_ids[r] for r in rows], pool_features(chat, info, lists, fused, rows, scores, self.rrf_k))
            )
        return out

    def _search_one(
        self,
        chat: ChatIndex,
        query: str,
        info: query_understanding.QueryInfo,
        scores: QueryScores,
        k: int,
        *,
        variant: str,
        pool: int,
        need_fresh: bool,
        reranker: Reranker | None,
        timings: dict[str, float],
        first_stage: tuple | None = None,
    ) -> SearchResult:
        """``search`` of ``query``, whose search text (``_parse``) and vector are those of ``scores``;
        ``first_stage``: ``_first_stage``'s result for this variant, when the caller has it."""
        search_query, qvec = scores.query, scores.qvec
        t0 = time.perf_counter()
        t = time.perf_counter()
        ranked, found, lists = first_stage or self._first_stage(chat, variant, info, scores)
        extra: dict[str, object] = {}
        if variant == "dual_path":
            tree_cfg = option(self.config, "tree")
            block_rank = dense.top_k(dense.cosine_scores(chat.block_vectors, qvec)) if chat.block_names else []
            thread_rank = dense.top_k(dense.cosine_scores(chat.thread_vectors, qvec)) if chat.thread_names else []
            result = tree.dual_path(
                ranked,
                block_rank,
                thread_rank,
                block_of=chat.block_of,
                thread_blocks=chat.thread_blocks,
                anchors=int(tree_cfg["anchors"]),
                k_global=int(tree_cfg["k_global"]),
                density_threshold=float(tree_cfg["density_threshold"]),
                exploit_weights=tuple(tree_cfg["exploit_weights"]),
                explore_weights=tuple(tree_cfg["explore_weights"]),
                rrf_k=self.rrf_k,
            )
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
            x = pool_features(chat, info, lists, ranked, rows, scores, self.rrf_k)
            model = self.learned
            learned = model.score(x[:, [list(FEATURES).index(f) for f in model.features]])
            # Reported as softmax weight relative to the pool's best, in (0, 1], which the agent's
            # grades read as relative scores.
            temperature = float(option(self.config, "learned_scores.temperature"))
            relative = np.exp((learned - learned.max()) / temperature)
            second = [(rows[i], float(relative[i])) for i in ranking(learned)]
            timings["learned"] = (time.perf_counter() - t) * 1000

        t = time.perf_counter()
        expanded_by: dict[int, str] = {}
        if variant in ("hybrid_expand", "hybrid_expand_rerank"):
            e = option(self.config, "expand")
            second, expanded_by = expansion.expand(
                pool_ranked,
                chat.size,
                seeds=int(e["seeds"]),
                before=int(e["before"]),
                after=int(e["after"]),
                decay=float(e["decay"]),
                block_of=chat.block_of,
                block_rows=chat.block_rows,
                block_decay=float(e["block_decay"]),
                linked=chat.linked_rows if chat.reply_rows else None,
            )
        timings["expand"] = (time.perf_counter() - t) * 1000

        hits = [
            chat.hit(r, s, {"retrieval": s}, found.get(r, []) + ([expanded_by[r]] if r in expanded_by else []))
            for r, s in second
        ]
        t = time.perf_counter()
        if variant == "hybrid_expand_rerank" or need_fresh:
            # need_fresh favours recent messages under every variant: the seed-004 hybrid score
            # with its fresh half-life and weight, unless the variant has its own reranker.
            chosen = reranker or (self.reranker if variant == "hybrid_expand_rerank" else self.fresh_reranker)
            if chosen is not None:
                context = RerankContext(last_time=chat.end, refs=chat.refs, tiers=chat.tiers, need_fresh=need_fresh)
                hits = chosen.rerank(query, hits, context)
                extra["reranker"] = chosen.name
        timings["rerank"] = (time.perf_counter() - t) * 1000
        timings["total"] = timings["parse"] + timings["encode"] + (time.perf_counter() - t0) * 1000

        trace = RankTrace(
            candidates=[(chat.local_ids[r], s) for r, s in pool_ranked], reranked=[(h.local_id, h.score) for h in hits]
        )
        query_info = {**info.to_dict(), "variant": variant, "search_query": search_query, **extra}
        return SearchResult(hits=hits[:k], trace=trace, query_info=query_info, timings_ms=timings)
