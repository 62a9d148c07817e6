"""The tree-retrieval design's tree traversal study over a chat's tree (L2 threads > L1 blocks > messages).

One ``Variant`` runs a question through iterations; each iteration yields a full leaf ranking,
so nDCG@10 / recall@10 can be read at iteration 0 and at every later one:

- iteration 0: context-free expansion (``expansion``: baselines 2 / 2b and Variant A) and a
  flat leaf ranking for Query_0; with ``schema``, 3-5 categories induced from the branches that
  flat ranking hits, and each category's own leaf candidates (logged, not fused);
- iteration t >= 1: a rewrite when t is a multiple of ``rewrite_every`` (0: never) from the leaf
  evidence (the last ranking's best ``leaf`` messages; ``context="leafslate"`` adds the beam's
  branch descriptions); the rewriter's action sets Query_t (query_rewrite.query_t) and, on
  explore, restarts the descent at the top of the tree; then one beam step down: the beam's
  children (threads -> blocks; at the blocks, the beam's sibling blocks again) ranked by the
  branch ranking of Query_t, gated by the flat anchors when ``flat`` is on, the best ``beam``
  kept (``traverse`` off: no beam, the ranking is Query_t's flat one). The iteration's ranking
  is the beam's messages in Query_t's leaf order, then every other message in that order.

A ``Scorer`` ranks leaves and branches for a query and gives their texts; ``ChatScorer`` does it
with a ``Retriever`` (the message search of a variant; blocks as ``search_blocks`` ranks them; a
thread where its best block ranks), memoized per query.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from narrative_mirror.retrieval.fusion import rrf
from narrative_mirror.retrieval.query_rewrite import (
    EXPLORE,
    RewriteCache,
    Rewritten,
    offline_expand,
    offline_rewrite,
    offline_schema,
    query_t,
)


@dataclass
class Tree:
    blocks: dict[str, list[str]]  # block id -> its leaf ids
    threads: dict[str, list[str]]  # thread id -> its block ids

    def __post_init__(self) -> None:
        self.thread_of = {b: t for t, bs in self.threads.items() for b in bs}
        self.top = [*self.threads, *(b for b in self.blocks if b not in self.thread_of)]

    def leaves_under(self, node: str) -> list[str]:
        blocks = self.threads.get(node, [node])
        return [leaf for b in blocks for leaf in self.blocks.get(b, [])]

    def candidates(self, beam: Sequence[str]) -> list[str]:
        """Where the beam may go next: the top of the tree for an empty beam; a thread's blocks;
        for a block (the bottom), the blocks of its thread (itself included) or itself."""
        if not beam:
            return list(self.top)
        out: list[str] = []
        for node in beam:
            if node in self.threads:
                out += self.threads[node]
            else:
                thread = self.thread_of.get(node)
                out += self.threads[thread] if thread else [node]
        return list(dict.fromkeys(out))

    @classmethod
    def from_chat(cls, chat) -> Tree:
        """A ``ChatIndex``'s tree: its blocks' members and its threads' blocks."""
        threads = {
            chat.thread_names[t]: [chat.block_names[b] for b in bs] for t, bs in chat.thread_blocks.items() if bs
        }
        return cls(blocks={b: list(m) for b, m in chat.block_members.items()}, threads=threads)


class Scorer(Protocol):
    def leaves(self, query: str) -> list[str]: ...  # leaf ids, best first
    def branches(self, query: str) -> list[str]: ...  # block and thread ids, best first
    def leaf_texts(self, ids: Sequence[str]) -> list[str]: ...
    def branch_texts(self, ids: Sequence[str]) -> list[str]: ...


@dataclass(frozen=True)
class Variant:
    name: str
    expansion: str | None = None  # None, "thinkqe" or "executor"
    flat: bool = True  # the flat ranking's anchors gate the beam
    traverse: bool = True
    rewrite_every: int = 0  # 0: never rewrite
    context: str = "leaf"  # rewrite evidence: "leaf" or "leafslate" (leaf + the beam's branches)
    schema: bool = False
    explore_mode: str = "replace"
    iterations: int = 4
    beam: int = 2
    anchors: int = 5  # flat leaves that gate the beam
    leaf: int = 5  # leaf evidence handed to the rewriter


@dataclass
class Tools:
    """What a run asks besides the scorer; offline by default. The cache keys every call."""

    rewrite: Callable[..., Rewritten] = offline_rewrite
    expand: Callable[[str, str], str] = offline_expand
    schema: Callable[[str, Sequence[str]], list[str]] = offline_schema
    cache: RewriteCache = field(default_factory=RewriteCache)
    name: str = "offline"


@dataclass
class Run:
    queries: list[str] = field(default_factory=list)  # Query_t of each iteration
    actions: list[str | None] = field(default_factory=list)  # the rewriter's action (None: no rewrite)
    beams: list[list[str]] = field(default_factory=list)
    rankings: list[list[str]] = field(default_factory=list)
    schema: list[str] = field(default_factory=list)
    schema_candidates: dict[str, list[str]] = field(default_factory=dict)


def _step(tree: Tree, beam: list[str], ranked_branches: Sequence[str], anchors: Sequence[str], width: int) -> list[str]:
    options = tree.candidates(beam)
    by_score = [b for b in ranked_branches if b in set(options)]
    by_score += [b for b in options if b not in set(by_score)]
    if anchors:
        held = {b: sum(a in set(tree.leaves_under(b)) for a in anchors) for b in options}
        gated = sorted((b for b in options if held[b]), key=lambda b: (-held[b], by_score.index(b)))
        by_score = [node for node, _ in rrf([by_score, gated], k=60)]
    return by_score[:width]


def _ranking(tree: Tree, beam: Sequence[str], leaves: Sequence[str]) -> list[str]:
    inside = {leaf for node in beam for leaf in tree.leaves_under(node)}
    return [x for x in leaves if x in inside] + [x for x in leaves if x not in inside]


def run_variant(
    variant: Variant, question: str, tree: Tree, scorer: Scorer, tools: Tools | None = None, depth: int = 20
) -> Run:
    """``variant`` on ``question``: see the module doc. Rankings are cut to ``depth``."""
    tools = tools or Tools()
    cache, run = tools.cache, Run()
    query0 = question
    if variant.expansion:
        query0 = cache.lookup(
            f"expand:{variant.expansion}:{tools.name}",
            question,
            [],
            None,
            lambda: {"query": tools.expand(question, variant.expansion)},
        )["query"]
    query = query0
    leaves = scorer.leaves(query)
    run.queries.append(query)
    run.actions.append(None)
    run.beams.append([])
    run.rankings.append(list(leaves[:depth]))
    anchors = list(leaves[: variant.anchors]) if variant.flat else []
    if variant.schema:
        hit = scorer.branches(query)[:SCHEMA_BRANCHES]
        descriptions = scorer.branch_texts(hit)
        run.schema = cache.lookup(
            f"schema:{tools.name}",
            question,
            descriptions,
            None,
            lambda: {"categories": tools.schema(question, descriptions)},
        )["categories"]
        run.schema_candidates = {c: scorer.leaves(f"{question} {c}")[:10] for c in run.schema}
    beam: list[str] = []
    rewritten: Rewritten | None = None
    for number in range(1, variant.iterations):
        action = None
        if variant.rewrite_every > 0 and number % variant.rewrite_every == 0:
            evidence = scorer.leaf_texts(run.rankings[-1][: variant.leaf])
            slate = scorer.branch_texts(beam) if variant.context == "leafslate" else []
            previous = rewritten
            value = cache.lookup(
                f"rewrite:{tools.name}",
                question,
                [*evidence, *slate, *run.schema],
                previous.action if previous else None,
                lambda e=evidence, s=slate, p=previous: dataclasses.asdict(
                    tools.rewrite(question, e, s, run.schema, p)
                ),
            )
            rewritten = Rewritten(**value)
            action = rewritten.action
            query = query_t(query0, rewritten, variant.explore_mode)
            leaves = scorer.leaves(query)
            if action == EXPLORE:
                beam = []  # escape: the descent starts again at the top, under the new query
        if variant.traverse and tree.top:
            beam = _step(tree, beam, scorer.branches(query), anchors, variant.beam)
        run.queries.append(query)
        run.actions.append(action)
        run.beams.append(list(beam))
        run.rankings.append(_ranking(tree, beam, leaves)[:depth])
    return run


SCHEMA_BRANCHES = 8  # flat branch hits a schema is induced from
BRANCH_DEPTH = 40  # blocks ranked per query; a beam candidate below them ranks after them, in tree order


class ChatScorer:
    """A ``Scorer`` over one indexed chat of a ``Retriever``; rankings memoized per query."""

    def __init__(self, retriever, chat_file: str, variant: str | None = None, pool: int = 200):
        self.retriever, self.chat_file, self.variant, self.pool = retriever, chat_file, variant, pool
        self.chat = retriever.chat(chat_file)
        self._leaves: dict[str, list[str]] = {}
        self._branches: dict[str, list[str]] = {}
        self._texts: dict[str, str] | None = None

    def leaves(self, query: str) -> list[str]:
        if query not in self._leaves:
            hits = self.retriever.search(self.chat_file, query, k=self.pool, variant=self.variant).hits
            self._leaves[query] = [h.local_id for h in hits]
        return self._leaves[query]

    def branches(self, query: str) -> list[str]:
        if query not in self._branches:
            depth = min(BRANCH_DEPTH, len(self.chat.block_names))
            blocks = self.retriever.search_blocks(self.chat_file, query, k=depth, variant=self.variant) if depth else []
            out: list[str] = []
            for block in blocks:  # a thread ranks just before its best block
                if block.thread_id and block.thread_id not in out:
                    out.append(block.thread_id)
                out.append(block.block_id)
            self._branches[query] = out
        return self._branches[query]

    def leaf_texts(self, ids: Sequence[str]) -> list[str]:
        return [h.text for h in self.retriever.messages(self.chat_file, list(ids))]

    def branch_texts(self, ids: Sequence[str]) -> list[str]:
        if self._texts is None:
            store = self.retriever.store
            blocks, threads = store.blocks_for(self.chat_file), store.threads_for(self.chat_file)
            self._texts = dict(zip(blocks["block_id"].to_list(), blocks["text"].to_list()))
            self._texts.update(zip(threads["thread_id"].to_list(), threads["text"].to_list()))
        return [self._texts[i] for i in ids if self._texts.get(i)]
