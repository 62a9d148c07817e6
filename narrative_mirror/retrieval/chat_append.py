"""A cached ``ChatIndex`` grown by messages added after it (a live chat's new rows), equal to the
index a fresh read of the whole chat would build, without that read: only the new messages are
tokenized, scored for the learned fusion's features and voted on for speaker aliases; the BM25
indexes are rebuilt from the kept term counts and only the windows that reach the new rows are
recomputed (measured in benchmarks/live_memory.py: a fraction of the read and build of the whole chat).
"""

from __future__ import annotations

import copy
from collections import Counter

import numpy as np
import polars as pl
from scipy import sparse

from narrative_mirror.layers.l15_signals import speaks_of_self
from narrative_mirror.retrieval import chat_index, dense, query_names
from narrative_mirror.retrieval.chat_index import ChatIndex, flags, reactions, window_matrix, window_means
from narrative_mirror.retrieval.lexical import BM25Index, Vocabulary, widen

# ChatIndex list attribute -> messages column: the new rows' values are appended.
_LISTS = {
    "local_ids": "local_id",
    "message_ids": "message_id",
    "positions": "position",
    "sessions": "session",
    "speakers": "speaker",
    "raw_texts": "raw_text",
    "texts": "text",
    "timestamps": "timestamp",
    "block_ids": "block_id",
}


class NotAppendable(ValueError):
    """The rows are not messages after the cached ones (read the chat whole instead)."""


def _window_tail(chat: ChatIndex, new: ChatIndex, vectors: np.ndarray, *, norms_only: bool) -> np.ndarray:
    """The window means (or their lengths) of every row of ``new``: those of the cached rows
    whose windows end before the new rows are kept, the others computed over the chat's tail
    (the same sums in the same order as a whole computation)."""
    width, old_size = chat.window, chat.size
    keep = old_size - width
    old = chat.window_norms if norms_only else chat.window_vectors
    start = max(0, keep - width)
    if keep <= 0 or old is None:
        means = window_means(vectors, width, norms_only=norms_only)
        return means if norms_only else dense.normalize_rows(means, in_place=True)
    tail = window_means(vectors[start:], width, norms_only=norms_only)[keep - start :]
    if not norms_only:
        tail = dense.normalize_rows(tail, in_place=True)
    return np.concatenate([old[:keep], tail])


def appended(chat: ChatIndex, messages: pl.DataFrame) -> ChatIndex:
    """A new ``ChatIndex``: ``chat`` followed by ``messages`` (rows of the ``messages`` table whose
    positions come after the chat's last one). ``chat`` itself is not changed (queries running on
    it go on). Raises ``NotAppendable`` when the rows do not simply follow."""
    if messages.height == 0:
        return chat
    messages = messages.sort("position")
    if messages["position"][0] <= chat.positions[-1] or set(messages["chat_file"].to_list()) != {chat.chat_file}:
        raise NotAppendable("rows before the cached ones or of another chat")
    fresh_ids = messages["local_id"].to_list()
    if any(lid in chat.row_of for lid in fresh_ids) or len(set(fresh_ids)) != len(fresh_ids):
        raise NotAppendable("ids already in the chat")
    members = {m for ids in chat.block_members.values() for m in ids}
    if members.intersection(fresh_ids):  # a block built before names them: its rows change
        raise NotAppendable("new messages belong to a block")
    new = copy.copy(chat)
    old_size, size = chat.size, chat.size + messages.height
    new.size = size
    for attribute, column in _LISTS.items():
        setattr(new, attribute, getattr(chat, attribute) + messages[column].to_list())
    raw_texts = messages["raw_text"].to_list()
    refs, tiers = messages["refs"].to_list(), messages["importance_tier"].to_list()
    new.refs = {**chat.refs, **dict(zip(fresh_ids, refs))}
    new.tiers = {**chat.tiers, **dict(zip(fresh_ids, tiers))}
    new.row_of = {**chat.row_of, **{lid: old_size + i for i, lid in enumerate(fresh_ids)}}
    new.row_of_message = {
        **chat.row_of_message,
        **{mid: old_size + i for i, mid in enumerate(messages["message_id"].to_list())},
    }
    new.times = np.concatenate([chat.times, messages["timestamp"].to_numpy().astype("datetime64[us]")])
    vectors = np.asarray(messages["vector"].to_numpy(), dtype=np.float32)
    new.vectors = np.concatenate([chat.vectors, vectors])
    new.session_array = np.array(new.sessions, dtype=np.int64)
    new.log_words = np.concatenate([chat.log_words, np.log1p([len(t.split()) for t in raw_texts])])
    new.is_question = np.concatenate([chat.is_question, np.array(["?" in t for t in raw_texts], dtype=np.float64)])
    new.after_question = np.concatenate([[0.0], new.is_question[:-1]])
    new.first_person = np.concatenate(
        [chat.first_person, np.array([speaks_of_self(t) for t in raw_texts], dtype=np.float64)]
    )
    new.tier_array = np.concatenate([chat.tier_array, np.array(tiers, dtype=np.float64)])
    new.refs_array = np.concatenate([chat.refs_array, np.array(refs, dtype=np.float64)])
    new.temporal = np.concatenate(
        [chat.temporal, (messages["temporal"].list.len().fill_null(0).to_numpy() > 0).astype(np.float64)]
    )

    # BM25: a copy of the vocabulary grows by the new tokens (the cached index keeps its own).
    vocabulary = Vocabulary(chat.bm25.vocabulary.stem)
    vocabulary.ids = dict(chat.bm25.vocabulary.ids)
    added_counts = vocabulary.count(new.texts[old_size:])
    counts = sparse.vstack([widen(chat.message_counts, len(vocabulary)), added_counts], format="csr")
    new.message_counts = counts
    new.bm25 = BM25Index.from_counts(vocabulary, counts)
    new.window_bm25 = BM25Index.from_counts(vocabulary, window_matrix(size, chat.window) @ counts)
    # block_bm25 stays: new messages are in no block, so no block's counts change

    new.chunked_cosines = size >= chat_index.CHUNKED_COSINES_FROM
    if new.chunked_cosines:
        new.window_norms = (
            _window_tail(chat, new, new.vectors, norms_only=True)
            if chat.chunked_cosines
            else window_means(new.vectors, chat.window, norms_only=True)
        )
        rows = np.arange(size)
        new.window_bounds = (np.maximum(rows - chat.window, 0), np.minimum(rows + chat.window + 1, size))
        new.window_vectors = None
    else:
        new.window_vectors = _window_tail(chat, new, new.vectors, norms_only=False)
    block_number = {b: i for i, b in enumerate(chat.block_names)}
    new.block_of = np.concatenate(
        [
            chat.block_of,
            np.array([block_number.get(b, -1) if b else -1 for b in new.block_ids[old_size:]], dtype=np.int64),
        ]
    )

    new.edited = chat.edited + flags(messages, "edited")
    new.bots = chat.bots + flags(messages, "bot")
    new.reactions = chat.reactions + reactions(messages)
    replies_to = messages["reply_to"].to_list() if "reply_to" in messages.columns else [None] * messages.height
    parents = [new.row_of.get(p, -1) if p else -1 for p in replies_to]
    new.parent_row = np.concatenate([chat.parent_row, np.array(parents, dtype=np.int64)])
    new.reply_rows = {row: list(rows) for row, rows in chat.reply_rows.items()}
    for i, parent in enumerate(parents):
        if parent >= 0:
            new.reply_rows.setdefault(parent, []).append(old_size + i)
    new.addressed = chat.addressed + [new.speakers[p] if p >= 0 else None for p in parents]

    new.speaker_names = list(dict.fromkeys(new.speakers))
    speaker_number = {s: i for i, s in enumerate(new.speaker_names)}
    new.speaker_codes = np.concatenate(
        [chat.speaker_codes, np.array([speaker_number[s] for s in new.speakers[old_size:]], dtype=np.int64)]
    )
    added = list(zip(new.speakers[old_size:], raw_texts))
    if new.speaker_names == chat.speaker_names:
        votes = {name: Counter(counter) for name, counter in chat.alias_votes.items()}
        for name, counter in query_names.alias_votes(added, new.speaker_names, new.addressed[old_size:]).items():
            votes.setdefault(name, Counter()).update(counter)
    else:  # a new speaker changes who is addressed: every message votes again
        votes = query_names.alias_votes(list(zip(new.speakers, new.raw_texts)), new.speaker_names, new.addressed)
    new.alias_votes = votes
    new.aliases = query_names.aliases_from_votes(votes, new.speaker_names, "\n".join(new.raw_texts))
    entities = sorted(set(chat.entities) | set(messages["entities"].explode().drop_nulls().to_list()))
    if entities != chat.entities or new.aliases != chat.aliases or new.speaker_names != chat.speaker_names:
        new.entities = entities
        new.entity_matcher = query_names.EntityMatcher(entities, exclude=[*new.speaker_names, *new.aliases])
    added_times = new.timestamps[old_size:]
    new.start, new.end = min(chat.start, *added_times), max(chat.end, *added_times)
    new.nbytes = new._estimate_bytes()
    return new
