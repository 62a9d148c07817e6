"""L1: split each session of a chat into contiguous topic blocks.

Boundaries inside a session come from two cues:
- time: a pause longer than ``time_gap_minutes`` between two messages always starts a block
  (even if that leaves a block shorter than ``min_block_messages``: a long pause is a new
  conversation);
- meaning (TextTiling-like): at every gap, the cosine between the normalized mean vector of the
  ``window`` messages before and after it; a gap's depth is how far that similarity dips below
  the nearest peaks on both sides. Gaps deeper than ``depth_threshold`` become boundaries,
  deepest first, as long as every block keeps at least ``min_block_messages`` messages.
Blocks longer than ``max_block_messages`` are then split at their deepest gap (recursively).

Every message belongs to exactly one block; blocks never cross sessions. ``block_id`` is
``f"{chat_file}/S{session}/B{n}"`` with ``n`` 0-based within the session; ``block_index`` is
0-based over the whole chat in file (time) order. ``message_ids`` lists ALL local ids of the range.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl

from narrative_mirror import schema
from narrative_mirror.layers.params import L1Params, SummaryParams, section
from narrative_mirror.layers.summarize import Summarizer, central_summary
from narrative_mirror.layers.text import content_tokens, speaker_words, tfidf_keywords, truncate

SYSTEM_BLOCK_LABEL = "chat events"  # a block of system lines only (joins, adds, calls): no topic words


def message_lines(messages: pl.DataFrame) -> list[str]:
    """``"speaker: text"`` per message (plus the image caption when there is one); a line without
    a speaker (a system line: "Ana added Ben") is its text alone."""
    lines = []
    for speaker, text, caption in zip(messages["speaker"], messages["text"], messages["image_caption"]):
        said = f"{text} [image: {caption}]" if caption else text
        lines.append(f"{speaker}: {said}" if speaker else said)
    return lines


def check_inputs(messages: pl.DataFrame, vectors: np.ndarray, where: str) -> pl.DataFrame:
    """``messages`` conformed to schema.MESSAGES; errors name ``where`` and the problem."""
    messages = schema.conform(messages, schema.MESSAGES, f"{where}: messages")
    if messages["chat_file"].n_unique() > 1:
        raise ValueError(f"{where}: messages of several chat files {messages['chat_file'].unique().to_list()}")
    positions = messages["position"].to_numpy()
    if len(positions) > 1 and not (np.diff(positions) > 0).all():
        raise ValueError(f"{where}: messages must be ordered by strictly increasing position")
    if vectors.ndim != 2 or vectors.shape[0] != messages.height:
        raise ValueError(
            f"{where}: vectors shape {vectors.shape} does not match {messages.height} messages (one row each)"
        )
    if not np.isfinite(vectors).all():
        raise ValueError(f"{where}: vectors contain NaN or infinite values")
    return messages


def gap_depths(vectors: np.ndarray, window: int) -> np.ndarray:
    """Depth score of each gap of one session; entry g is the gap before message g (entry 0 unused)."""
    n = len(vectors)
    depths = np.zeros(n)
    if n < 2:
        return depths
    cumulative = np.vstack([np.zeros((1, vectors.shape[1])), np.cumsum(vectors, axis=0, dtype=np.float64)])
    gaps = np.arange(1, n)
    left = cumulative[gaps] - cumulative[np.maximum(gaps - window, 0)]
    right = cumulative[np.minimum(gaps + window, n)] - cumulative[gaps]
    left /= np.linalg.norm(left, axis=1, keepdims=True) + 1e-12
    right /= np.linalg.norm(right, axis=1, keepdims=True) + 1e-12
    similarity = np.concatenate([[np.inf], (left * right).sum(axis=1)])
    for g in gaps:
        # Climb to the nearest peak on each side, as TextTiling does.
        i = g
        while i - 1 >= 1 and similarity[i - 1] >= similarity[i]:
            i -= 1
        j = g
        while j + 1 < n and similarity[j + 1] >= similarity[j]:
            j += 1
        depths[g] = (similarity[i] - similarity[g]) + (similarity[j] - similarity[g])
    return depths


def segment_session(vectors: np.ndarray, pause_minutes: np.ndarray, params: L1Params) -> list[tuple[int, int]]:
    """Half-open (start, end) ranges covering one session's messages 0..n-1 exactly once.

    ``pause_minutes[g]`` is the time between message g-1 and g (entry 0 unused).
    """
    n = len(vectors)
    depths = gap_depths(vectors, params.window)
    boundaries = {0, n} | {g for g in range(1, n) if pause_minutes[g] > params.time_gap_minutes}
    candidates = sorted(
        (g for g in range(1, n) if g not in boundaries and depths[g] > params.depth_threshold),
        key=lambda g: (-depths[g], g),
    )
    for g in candidates:
        if all(abs(g - b) >= params.min_block_messages for b in boundaries):
            boundaries.add(g)
    ordered = sorted(boundaries)
    ranges = []
    for start, end in zip(ordered, ordered[1:]):
        ranges.extend(_split_long(start, end, depths, params))
    return ranges


def _split_long(start: int, end: int, depths: np.ndarray, params: L1Params) -> list[tuple[int, int]]:
    if end - start <= params.max_block_messages:
        return [(start, end)]
    # Deepest gap leaving min_block_messages on both sides (the range is long enough for one).
    lo, hi = start + params.min_block_messages, end - params.min_block_messages
    cut = max(range(lo, hi + 1), key=lambda g: (depths[g], -g)) if lo <= hi else (start + end) // 2
    return _split_long(start, cut, depths, params) + _split_long(cut, end, depths, params)


def build_topic_blocks(
    messages: pl.DataFrame, vectors: np.ndarray, params: Mapping[str, Any], summarizer: Summarizer | None = None
) -> pl.DataFrame:
    """Topic blocks (schema.BLOCKS) of one chat.

    ``messages``: schema.MESSAGES of ONE chat ordered by position; ``vectors``: row i = message
    row i, L2-normalized. ``params``: the layers config. Without ``summarizer``, label = top
    keywords and summary = the messages closest to the block's mean vector; with one, both come
    from ``summarizer.summarize("block", lines)``.
    """
    l1 = section(params, "l1", L1Params)
    summary_params = section(params, "summary", SummaryParams)
    # system lines (joins, calls, "X added Y") stay block members but never name or summarize a block
    system = (
        messages["system"].fill_null(False).to_list() if "system" in messages.columns else [False] * messages.height
    )
    messages = check_inputs(messages, vectors, "build_topic_blocks")
    if messages.height == 0:
        return schema.empty_frame(schema.BLOCKS)

    sessions = messages["session"].to_numpy()
    times = messages["timestamp"].to_numpy().astype("datetime64[us]")
    pause_minutes = np.concatenate([[0.0], np.diff(times).astype(np.float64) / 60e6])

    ranges: list[tuple[int, int]] = []  # absolute half-open row ranges, in file order
    session_starts = [0] + [i for i in range(1, len(sessions)) if sessions[i] != sessions[i - 1]] + [len(sessions)]
    for start, end in zip(session_starts, session_starts[1:]):
        # A session's first pause is a session change, not a gap inside it.
        pauses = np.concatenate([[0.0], pause_minutes[start + 1 : end]])
        ranges.extend((start + a, start + b) for a, b in segment_session(vectors[start:end], pauses, l1))

    lines = message_lines(messages)
    speakers = messages["speaker"].to_list()
    chat_speakers = speaker_words(speakers)  # full names' words too: a group member's first name is no topic
    local_ids = messages["local_id"].to_list()
    texts = messages["text"].to_list()
    said = [[i for i in range(a, b) if not system[i]] or list(range(a, b)) for a, b in ranges]
    # a block of system lines only is named as such: its words ("added", "calls") are no topic
    only_system = [all(system[i] for i in rows) for rows in said]
    block_terms = [
        [] if events else [t for i in rows for t in content_tokens(texts[i], exclude=chat_speakers)]
        for rows, events in zip(said, only_system)
    ]
    keywords = tfidf_keywords(block_terms, l1.keywords)

    chat_file = messages["chat_file"][0]
    positions = messages["position"].to_list()
    timestamps = messages["timestamp"].to_list()
    rows = []
    per_session_count: dict[int, int] = {}
    for block_index, ((a, b), block_keywords, rows_said, events) in enumerate(zip(ranges, keywords, said, only_system)):
        session = int(sessions[a])
        n = per_session_count.get(session, 0)
        per_session_count[session] = n + 1
        lines_said = [lines[i] for i in rows_said]
        if events or summarizer is None:
            mean = vectors[rows_said].astype(np.float64).sum(axis=0)
            centrality = (vectors[rows_said] @ (mean / (np.linalg.norm(mean) + 1e-12))).tolist()
            label = SYSTEM_BLOCK_LABEL if events else ", ".join(block_keywords[: summary_params.label_terms])
            label = label or truncate(lines_said[0], summary_params.label_max_chars)
            summary = central_summary(lines_said, centrality, summary_params)
        else:
            label, summary = summarizer.summarize("block", lines_said)
        rows.append(
            {
                "block_id": f"{chat_file}/S{session}/B{n}",
                "chat_file": chat_file,
                "session": session,
                "block_index": block_index,
                "first_position": positions[a],
                "last_position": positions[b - 1],
                "message_ids": local_ids[a:b],
                "start_time": min(timestamps[a:b]),
                "end_time": max(timestamps[a:b]),
                "speakers": list(dict.fromkeys(speakers[a:b])),
                "keywords": block_keywords,
                "label": label,
                "summary": summary,
            }
        )
    return pl.DataFrame(rows, schema=schema.BLOCKS)
