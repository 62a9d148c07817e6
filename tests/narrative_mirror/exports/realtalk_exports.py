"""A RealTalk chat written out as each chat app would export it, read back, and searched: the
converter of issue #26's done-when check (the test runs one format on part of Chat_1, the
benchmark ``benchmarks/export_retrieval.py`` all formats on whole train chats).

RealTalk times are local without a zone: they are read as ``tz`` and written in each format's
way. RealTalk has no replies: a message right after a question of the other speaker is written
as its reply (Slack puts it in the question's thread, Telegram and Discord link it). Retrieval is
compared by message text, since each format has its own ids.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import polars as pl
import writers
from index_frames import index_messages

from narrative_mirror.chats import Chat
from narrative_mirror.exports.folder import ImportOptions, find_folder_chats
from narrative_mirror.exports.frames import load_export_chat
from narrative_mirror.gold import gold_qa_frame
from narrative_mirror.retrieval.engine import Retriever

FORMATS: dict[str, Callable] = {
    "whatsapp_android_12h": lambda m, folder, tz: writers.whatsapp_android(m, folder, tz=tz, title="Chat", hour12=True),
    "whatsapp_ios_24h": lambda m, folder, tz: writers.whatsapp_ios(m, folder, tz=tz, title="Chat", as_zip=True),
    "telegram": lambda m, folder, tz: writers.telegram(m, folder, tz=tz),
    "slack_threads": lambda m, folder, tz: writers.slack(m, folder),
    "discord": lambda m, folder, tz: writers.discord(m, folder, tz=tz),
    "messenger_escaped": lambda m, folder, tz: writers.messenger(m, folder, per_file=200),
}


def subset(chat: Chat, sessions: int) -> Chat:
    """The chat's first ``sessions`` sessions, with the questions whose evidence lies in them."""
    kept = chat.messages.filter(pl.col("session").rank("dense") <= sessions)
    ids = set(kept["local_id"].to_list())
    qa = [q for q in chat.qa if q.get("evidence") and all(e in ids for e in q["evidence"])]
    return Chat(chat.chat_file, chat.path, chat.format, chat.speakers, kept, qa)


def writer_messages(chat: Chat, tz: str) -> list[writers.Message]:
    """(author, UTC time, text, reply index) per message; the local times read in ``tz``."""
    zone = ZoneInfo(tz)
    rows = chat.messages.select("speaker", "timestamp", "text").rows()
    out = []
    for i, (speaker, local, text) in enumerate(rows):
        previous = rows[i - 1] if i else None
        reply = i - 1 if previous and previous[0] != speaker and previous[2].rstrip().endswith("?") else None
        out.append((speaker, local.replace(tzinfo=zone).astimezone(UTC), text, reply))
    return out


def export_chat(chat: Chat, fmt: str, folder: Path, tz: str) -> Chat:
    """``chat`` written in format ``fmt`` into ``folder`` and read back as the memory reads it."""
    folder.mkdir(parents=True, exist_ok=True)
    FORMATS[fmt](writer_messages(chat, tz), folder, tz)
    options = ImportOptions(tz=tz, day_first=True if fmt == "whatsapp_ios_24h" else None, machine_tz="UTC")
    chats, problems = find_folder_chats(folder, options)
    assert not problems and len(chats) == 1, problems
    return load_export_chat(next(iter(chats.values())), options)


def normalized(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


class TextVectors:
    """The embedder, each distinct text encoded once across all the chats of a run."""

    def __init__(self, embedder):
        self.embedder = embedder
        self.memo: dict[str, np.ndarray] = {}

    def __getattr__(self, name):
        return getattr(self.embedder, name)

    def encode(self, texts, progress=None):
        missing = [t for t in dict.fromkeys(texts) if t not in self.memo]
        if missing:
            self.memo.update(zip(missing, self.embedder.encode(missing)))
        return np.stack([self.memo[t] for t in texts]) if texts else np.zeros((0, 384), np.float32)


def index(store, chat: Chat, key: str, vectors: TextVectors) -> None:
    """The chat's layers and index rows under partition ``key`` (as the asset graph builds them)."""
    from narrative_mirror.embedding import message_texts

    messages = chat.messages.with_columns(
        pl.lit(key).alias("chat_file"), (pl.lit(f"{key}/") + pl.col("local_id")).alias("message_id")
    )
    matrix = vectors.encode(message_texts(messages))
    index_messages(store, messages, matrix)


def recall_by_text(
    retriever: Retriever, key: str, chat: Chat, questions: list[tuple[str, set[str]]], k: int = 10
) -> float:
    """Mean recall@k over ``questions`` (question, gold texts), a hit counted by its text."""
    text_of = dict(zip(chat.messages["local_id"].to_list(), map(normalized, chat.messages["text"].to_list())))
    recalls = []
    for question, gold in questions:
        found = {text_of[h.local_id] for h in retriever.search(key, question, k).hits}
        recalls.append(len(gold & found) / len(gold))
    return float(np.mean(recalls)) if recalls else 0.0


def gold_texts(chat: Chat) -> list[tuple[str, set[str]]]:
    """(question, normalized texts of its gold messages) for each question with gold ids."""
    text_of = dict(zip(chat.messages["local_id"].to_list(), map(normalized, chat.messages["text"].to_list())))
    gold = gold_qa_frame(chat)
    return [(q, {text_of[i] for i in ids}) for q, ids in zip(gold["question"], gold["gold_ids"]) if len(ids)]
