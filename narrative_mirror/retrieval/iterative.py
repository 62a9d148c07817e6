"""The tree-retrieval design's iterative loop as a retrieval variant: a flat search; then, round by round, a
rewrite of the question from the leaf context (every ``rewrite_every`` rounds) and a search
restricted to the branches the hits sit in (their L1 blocks and those blocks' L2 threads);
the rankings of all rounds fused by reciprocal rank. The branch context a rewriter may read is
the branches' stored summaries (block label/summary/keywords, thread title/summary), not their
messages. The rewrite is offline by default (the leaf context's most repeated terms); an LLM
rewriter is any ``rewrite(question, leaf_texts, branch_texts) -> query``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel

from narrative_mirror.layers.text import content_tokens
from narrative_mirror.llm import DATA_BLOCK_NOTICE, LLMClient, format_messages_as_data
from narrative_mirror.settings import load_prompt

Rewrite = Callable[[str, Sequence[str], Sequence[str]], str]
FEEDBACK_TERMS = 4


def offline_rewrite(question: str, leaf_texts: Sequence[str], branch_texts: Sequence[str] = ()) -> str:
    """The question plus the FEEDBACK_TERMS terms the leaf context repeats most (ties: alphabetical)."""
    asked = set(content_tokens(question))
    counts = Counter(t for text in leaf_texts for t in set(content_tokens(text)) if t not in asked)
    terms = [t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:FEEDBACK_TERMS]]
    return " ".join([question, *terms])


class _Queries(BaseModel):
    queries: list[str]


def llm_rewrite(llm: LLMClient) -> Rewrite:
    """A rewriter that asks ``llm`` (prompts/agent_rewrite.txt, one query) from the leaf messages
    and the branch summaries, both inside the data block; its first query, else the question."""

    def rewrite(question: str, leaf_texts: Sequence[str], branch_texts: Sequence[str]) -> str:
        system = load_prompt("agent_rewrite").replace("{limit}", "1") + "\n" + DATA_BLOCK_NOTICE
        rows = [(f"leaf{i}", "message", t) for i, t in enumerate(leaf_texts)]
        rows += [(f"branch{i}", "summary", t) for i, t in enumerate(branch_texts)]
        reply = llm.complete_json(
            system,
            f"Question: {question}\n\nMessages and branch summaries from a first "
            f"search:\n{format_messages_as_data(rows)}",
            _Queries,
        )
        return next((q.strip() for q in reply.queries if q.strip()), question)

    return rewrite


@dataclass
class LoopTrace:
    queries: list[str] = field(default_factory=list)  # the query of each round, the flat one first
    branches: list[list[str]] = field(default_factory=list)  # block ids each restricted round searched
    rankings: list[list[str]] = field(default_factory=list)  # each round's ranked ids


def branch_context(retriever, chat_file: str, block_ids: Sequence[str]) -> list[str]:
    """The stored summaries of ``block_ids`` and of the L2 threads holding them (index rows' text)."""
    blocks = retriever.store.blocks_for(chat_file)
    threads = retriever.store.threads_for(chat_file)
    wanted = set(block_ids)
    texts = [t for b, t in zip(blocks["block_id"].to_list(), blocks["text"].to_list()) if b in wanted and t]
    texts += [
        t for bs, t in zip(threads["block_ids"].to_list(), threads["text"].to_list()) if t and wanted & set(bs or ())
    ]
    return texts


def _branches(chat, local_ids: Sequence[str], n_blocks: int) -> list[str]:
    """The blocks of the first hits (up to ``n_blocks``), widened to every block of their threads."""
    seeds: list[int] = []
    for lid in local_ids:
        b = int(chat.block_of[chat.row_of[lid]])
        if b >= 0 and b not in seeds:
            seeds.append(b)
        if len(seeds) == n_blocks:
            break
    found = list(seeds)
    for b in seeds:
        t = int(chat.thread_of[b])
        found += [x for x in chat.thread_blocks.get(t, []) if x not in found] if t >= 0 else []
    return [chat.block_names[b] for b in found]


def iterative_search(
    retriever,
    chat_file: str,
    question: str,
    k: int = 10,
    *,
    rounds: int = 3,
    rewrite_every: int = 1,
    n_blocks: int = 2,
    leaf: int = 5,
    pool: int = 200,
    rewrite: Rewrite = offline_rewrite,
    variant: str | None = None,
    rrf_k: int = 60,
) -> tuple[list[str], LoopTrace]:
    """(the ``k`` best ids, the loop's trace). Round 0 is the flat ``variant`` search (default: the
    retriever's); each later round rewrites the query when its number is a multiple of
    ``rewrite_every`` (else keeps the last one; 0 never rewrites) and searches only the branches of
    the previous round's ``leaf`` best hits. Rankings fuse by RRF (``rrf_k``: retrieval.toml's), the
    flat one counting as much as any round."""
    chat = retriever.chat(chat_file)
    trace = LoopTrace()
    query = question
    ranking = [h.local_id for h in retriever.search(chat_file, query, k=pool, variant=variant).hits]
    trace.queries.append(query)
    trace.rankings.append(ranking)
    for number in range(1, rounds):
        branches = _branches(chat, ranking[:leaf], n_blocks)
        if not branches:
            break
        if rewrite_every > 0 and number % rewrite_every == 0:
            leaf_texts = [h.text for h in retriever.messages(chat_file, ranking[:leaf])]
            query = rewrite(question, leaf_texts, branch_context(retriever, chat_file, branches))
        allowed = {lid for b in branches for lid in chat.block_members[b]}
        ranking = [
            h.local_id
            for h in retriever.search(chat_file, query, k=pool, variant=variant).hits
            if h.local_id in allowed
        ]
        trace.queries.append(query)
        trace.branches.append(branches)
        trace.rankings.append(ranking)
    fused: Counter[str] = Counter()
    for ranked in trace.rankings:
        for rank, lid in enumerate(ranked):
            fused[lid] += 1.0 / (rrf_k + rank + 1)
    first = {lid: i for i, lid in enumerate(trace.rankings[0])}
    ordered = sorted(fused, key=lambda lid: (-fused[lid], first.get(lid, len(first))))
    return ordered[:k], trace
