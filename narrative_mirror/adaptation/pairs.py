"""Unlabeled training pairs from a chat's messages, by kind: ``turns`` (a message and the other
speaker's next message), ``replies`` (a message and the one it replies to, ``reply_to``),
``questions`` (the turns whose first message asks something: it has a "?"). Only message
columns are read; the gold questions, answers, gold ids and arcs never reach this module."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Sequence

import polars as pl

from narrative_mirror.embedding import message_search_text

# The only columns read: what a message record carries (schema.MESSAGE_RECORD), nothing else.
MESSAGE_COLUMNS = ("local_id", "position", "speaker", "text", "image_caption", "reply_to", "system")


KINDS = ("turns", "replies", "questions")
DEFAULT_KINDS = ("turns", "replies")


def chat_pairs(messages: pl.DataFrame, kinds: Sequence[str] = DEFAULT_KINDS) -> list[tuple[str, str]]:
    """(message, answer) texts of one chat, as embedded (``speaker: text``), of ``kinds``: each
    message with the other speaker's next message (``questions``: only a message that asks),
    then each reply with the message it replies to. System lines and empty texts are skipped;
    a pair is listed once."""
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise ValueError(f"adaptation pair kinds {sorted(unknown)}: expected some of {', '.join(KINDS)}")
    frame = messages.select([c for c in MESSAGE_COLUMNS if c in messages.columns])
    if "position" in frame.columns:
        frame = frame.sort("position")
    rows = frame.to_dicts()
    rows = [r for r in rows if not r.get("system") and (r.get("text") or "").strip()]
    texts = [message_search_text(r["speaker"], r["text"], r.get("image_caption") or "") for r in rows]
    pairs: list[tuple[str, str]] = []
    for i in range(len(rows) - 1):
        # the first message of the other speaker after this one (a run of one speaker is a turn)
        if rows[i + 1]["speaker"] != rows[i]["speaker"] and (
            "turns" in kinds or ("questions" in kinds and "?" in rows[i]["text"])
        ):
            pairs.append((texts[i], texts[i + 1]))
    by_id = {r["local_id"]: t for r, t in zip(rows, texts)}
    for row, text in zip(rows, texts) if "replies" in kinds else ():
        parent = by_id.get(row.get("reply_to") or "")
        if parent is not None and parent != text:
            pairs.append((parent, text))
    return list(dict.fromkeys(pairs))


def home_pairs(chats: Iterable[pl.DataFrame], kinds: Sequence[str] = DEFAULT_KINDS) -> list[tuple[str, str]]:
    """Every chat's pairs of ``kinds``, chat by chat, duplicates across chats listed once."""
    return list(dict.fromkeys(p for messages in chats for p in chat_pairs(messages, kinds)))


def sample_pairs(pairs: Sequence[tuple[str, str]], cap: int, seed: int = 0) -> list[tuple[str, str]]:
    """At most ``cap`` pairs, drawn evenly at random (fixed ``seed``: the same home trains the same)."""
    pairs = list(pairs)
    if cap <= 0 or len(pairs) <= cap:
        return pairs
    return random.Random(seed).sample(pairs, cap)


def pairs_version(pairs: Sequence[tuple[str, str]]) -> str:
    """Content hash of the pairs (their order included): the data version the adaptation trained on."""
    digest = hashlib.sha256()
    for first, second in pairs:
        digest.update(first.encode("utf-8") + b"\0" + second.encode("utf-8") + b"\1")
    return digest.hexdigest()[:16]
