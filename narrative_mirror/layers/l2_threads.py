"""L2: threads, storylines that link topic blocks across sessions.

Rule: every block is compared with every block of EARLIER sessions; the score is
``cosine(centered block vectors) + entity_weight * Jaccard(entities)``. Vectors are centered on
the chat's mean block vector first: small talk makes all blocks of a chat alike, and raw cosines
chained most of a chat into one thread (on the train chats the thread holding an ARC case was
~25-39% of the chat's blocks, ~11% after centering). Entities are the blocks' L1.5 entities minus
speaker names and entities too common in the chat (in more than
``[l15].common_entity_block_share`` of its blocks). A block is linked to its single best earlier
match when that score reaches ``link_threshold``; linked blocks form threads by union-find.
Centering needs a few blocks to mean anything: with only two blocks they point in opposite
directions and never link.

Membership:
- a block belongs to AT MOST ONE thread (threads are the connected components, a partition);
- a block in no thread is normal: components spanning fewer than ``min_sessions`` sessions
  (singletons included) are not threads, and their blocks stay unthreaded.
``block_ids`` are in time (block_index) order; ``thread_id`` = ``f"{chat_file}/T{n}"`` numbered
0-based by each thread's first block. Title/summary: offline, title = the keywords most member
blocks share and summary = the dated block labels in order; or from a summarizer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl

from narrative_mirror import schema
from narrative_mirror.layers.l15_signals import block_signals
from narrative_mirror.layers.params import L2Params, L15Params, SummaryParams, section
from narrative_mirror.layers.summarize import Summarizer
from narrative_mirror.layers.text import speaker_words, truncate


def block_vectors(blocks: pl.DataFrame, messages: pl.DataFrame, vectors: np.ndarray) -> np.ndarray:
    """Row i = normalized mean of the vectors of block row i's messages (float32).

    ``vectors`` row j belongs to ``messages`` row j.
    """
    if vectors.ndim != 2 or vectors.shape[0] != messages.height:
        raise ValueError(f"block_vectors: vectors shape {vectors.shape} does not match {messages.height} messages")
    row_of = {local_id: j for j, local_id in enumerate(messages["local_id"].to_list())}
    result = np.zeros((blocks.height, vectors.shape[1]), dtype=np.float32)
    for i, (block_id, ids) in enumerate(zip(blocks["block_id"].to_list(), blocks["message_ids"].to_list())):
        missing = [m for m in ids if m not in row_of]
        if missing or not ids:
            raise ValueError(f"block_vectors: block {block_id} has messages not in the chat: {missing[:5]}")
        mean = vectors[[row_of[m] for m in ids]].astype(np.float64).mean(axis=0)
        result[i] = mean / (np.linalg.norm(mean) + 1e-12)
    return result


def _union_find_roots(links: list[tuple[int, int]], n: int) -> list[int]:
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in links:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return [root(i) for i in range(n)]


def build_threads(
    blocks: pl.DataFrame,
    signals: pl.DataFrame,
    block_vectors: np.ndarray,
    params: Mapping[str, Any],
    summarizer: Summarizer | None = None,
) -> pl.DataFrame:
    """Threads (schema.THREADS) of one chat. ``block_vectors`` row i belongs to ``blocks`` row i."""
    l2 = section(params, "l2", L2Params)
    l15 = section(params, "l15", L15Params)
    summary_params = section(params, "summary", SummaryParams)
    blocks = schema.conform(blocks, schema.BLOCKS, "build_threads: blocks")
    if block_vectors.ndim != 2 or block_vectors.shape[0] != blocks.height:
        raise ValueError(
            f"build_threads: block_vectors shape {block_vectors.shape} does not match {blocks.height} blocks"
        )
    if blocks.height == 0:
        return schema.empty_frame(schema.THREADS)
    order = np.argsort(blocks["block_index"].to_numpy(), kind="stable")
    blocks = blocks[order.tolist()]
    centered = block_vectors[order].astype(np.float64)
    centered -= centered.mean(axis=0)
    centered /= np.linalg.norm(centered, axis=1, keepdims=True) + 1e-12

    aggregated = block_signals(signals)
    entities_of = dict(zip(aggregated["block_id"].to_list(), aggregated["entities"].to_list()))
    block_ids = blocks["block_id"].to_list()
    unknown = [b for b in block_ids if b not in entities_of]
    if unknown:
        raise ValueError(f"build_threads: no signals for blocks {unknown[:5]}")
    speakers = speaker_words(s for names in blocks["speakers"].to_list() for s in names)
    block_count = Counter(e for b in block_ids for e in entities_of[b])
    common = {e for e, n in block_count.items() if n > l15.common_entity_block_share * len(block_ids)}
    entity_sets = [set(entities_of[b]) - speakers - common for b in block_ids]

    sessions = blocks["session"].to_numpy()
    similarity = centered @ centered.T
    links = []
    for b in range(len(block_ids)):
        earlier = np.flatnonzero(sessions < sessions[b])
        if earlier.size == 0:
            continue
        scores = similarity[b, earlier] + l2.entity_weight * np.array(
            [len(entity_sets[a] & entity_sets[b]) / (len(entity_sets[a] | entity_sets[b]) or 1) for a in earlier]
        )
        best = int(np.argmax(scores[::-1]))  # reversed: a tie goes to the latest earlier block
        best = earlier.size - 1 - best
        if scores[best] >= l2.link_threshold:
            links.append((int(earlier[best]), b))

    roots = _union_find_roots(links, len(block_ids))
    members: dict[int, list[int]] = {}
    for b, r in enumerate(roots):
        members.setdefault(r, []).append(b)
    components = sorted(
        (rows for rows in members.values() if len(set(sessions[rows].tolist())) >= l2.min_sessions),
        key=lambda rows: rows[0],
    )

    chat_file = blocks["chat_file"][0]
    labels, summaries = blocks["label"].to_list(), blocks["summary"].to_list()
    keywords, starts = blocks["keywords"].to_list(), blocks["start_time"].to_list()
    ends, block_speakers = blocks["end_time"].to_list(), blocks["speakers"].to_list()
    rows = []
    for n, member_rows in enumerate(components):
        entity_count = Counter(e for b in member_rows for e in entity_sets[b])
        if summarizer is None:
            # Terms in most member blocks first; among those, the ones ranked higher in their blocks.
            in_blocks: Counter[str] = Counter()
            rank_score: Counter[str] = Counter()
            for b in member_rows:
                for rank, term in enumerate(keywords[b]):
                    in_blocks[term] += 1
                    rank_score[term] += len(keywords[b]) - rank
            ranked = sorted(in_blocks, key=lambda t: (-in_blocks[t], -rank_score[t], t))
            title = ", ".join(ranked[: summary_params.label_terms])
            title = title or labels[member_rows[0]]
            summary = truncate(
                " → ".join(f"{starts[b]:%Y-%m-%d} {labels[b]}" for b in member_rows), summary_params.summary_max_chars
            )
        else:
            items = [f"{starts[b]:%Y-%m-%d} {labels[b]}: {summaries[b]}" for b in member_rows]
            title, summary = summarizer.summarize("thread", items)
        rows.append(
            {
                "thread_id": f"{chat_file}/T{n}",
                "chat_file": chat_file,
                "block_ids": [block_ids[b] for b in member_rows],
                "start_time": min(starts[b] for b in member_rows),
                "end_time": max(ends[b] for b in member_rows),
                "participants": list(dict.fromkeys(s for b in member_rows for s in block_speakers[b])),
                "entities": sorted(entity_count, key=lambda e: (-entity_count[e], e))[: l2.max_entities],
                "title": title,
                "summary": summary,
            }
        )
    return pl.DataFrame(rows, schema=schema.THREADS)
