"""What the inspector pages read, and only reads: a chat's transcript from the stored messages
layer under ``NM_HOME/storage`` (every line, system lines, attachments and edits included; the
index the API serves when no layer is stored), its times in the chat's zone (``chat_time``), L1
blocks and L2 threads (stored layers, else the index), evaluation rows (``qa_eval``,
``arc_eval``, ``split``, ``gold_qa``, ``arc_cases``) and the experiment log."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from narrative_mirror import experiments, reactions, schema, storage
from narrative_mirror.chat_time import StoredClocks
from narrative_mirror.home import Home
from narrative_mirror.reactions import Reaction


@dataclass(frozen=True)
class Attachment:
    kind: str  # photo, video, audio, voice, sticker, gif, document, contact, file...
    name: str  # the file name, "" when the export gives none
    caption: str


@dataclass(frozen=True)
class Message:
    local_id: str
    position: int
    session: int
    speaker: str
    text: str
    timestamp: datetime  # in the chat's zone (aware) when it records one, else as the file wrote it
    block_id: str
    attachments: tuple[Attachment, ...] = ()
    edited: bool = False
    system: bool = False  # joins, leaves, calls, group changes: shown, never evidence
    bot: bool = False
    reactions: tuple[Reaction, ...] = ()


@dataclass(frozen=True)
class Block:
    """An L1 topic block: a run of messages of one session."""

    block_id: str
    session: int
    first_position: int
    last_position: int
    title: str
    summary: str
    keywords: tuple[str, ...]
    start: datetime
    end: datetime
    thread_id: str | None = None


@dataclass(frozen=True)
class Thread:
    """An L2 thread: a storyline over blocks of several sessions."""

    thread_id: str
    title: str
    summary: str
    block_ids: tuple[str, ...]
    start: datetime
    end: datetime


@dataclass
class Transcript:
    chat: str
    messages: list[Message]
    blocks: list[Block]
    threads: list[Thread]
    times: str = ""  # what the times are, said once: "times in Europe/Lisbon"
    row_of: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.row_of = {m.local_id: i for i, m in enumerate(self.messages)}

    @property
    def participants(self) -> list[str]:
        return list(dict.fromkeys(m.speaker for m in self.messages if not m.system))

    @property
    def said(self) -> int:
        """The messages people (and bots) wrote: every line but the system lines."""
        return sum(not m.system for m in self.messages)

    @property
    def sessions(self) -> int:
        return len({m.session for m in self.messages})

    def known(self, ids: list[str]) -> list[str]:
        return [i for i in ids if i in self.row_of]

    def excerpts(self, ids: list[str], width: int = 2) -> list[list[Message]]:
        """The messages ``ids`` with ``width`` neighbours on each side, overlapping windows merged,
        in file order (unknown ids are left out)."""
        rows = sorted({self.row_of[i] for i in self.known(ids)})
        spans: list[list[int]] = []
        for row in rows:
            start, end = max(0, row - width), min(len(self.messages) - 1, row + width)
            if spans and start <= spans[-1][1] + 1:
                spans[-1][1] = max(spans[-1][1], end)
            else:
                spans.append([start, end])
        return [self.messages[start : end + 1] for start, end in spans]


LINE_COLUMNS = (
    "local_id",
    "position",
    "session",
    "speaker",
    "text",
    "timestamp",
    "attachments",
    "edited",
    "system",
    "bot",
    "reactions",
)


def _block_at(blocks: list[Block], position: int) -> str:
    """The block whose range holds ``position`` (a system line the index leaves out), else ""."""
    return next((b.block_id for b in blocks if b.first_position <= position <= b.last_position), "")


def _words(text: str, limit: int = 90) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


class PageStore:
    """Reads for the pages over the served index (``retriever.store``) and the state folder
    ``home``. Transcripts are kept per chat until the index's table versions change."""

    def __init__(self, retriever: Any, home: Path):
        self.retriever, self.home = retriever, Path(home)
        self.clocks = StoredClocks(Home(self.home).storage)
        self._lock = threading.Lock()
        self._transcripts: dict[str, tuple[tuple, Transcript]] = {}

    @property
    def index(self):
        return self.retriever.store

    def chats(self) -> list[str]:
        return self.retriever.chat_files()

    def stored(self, asset: str, chat: str | None) -> pl.DataFrame | None:
        """The stored output of ``asset`` for ``chat``; None when there is none or it cannot be read."""
        path = storage.frame_path(Home(self.home).storage, asset, chat)
        if storage.frame_problem(path) is not None:
            return None
        try:
            return storage.read_frame(path)
        except Exception:  # a damaged frame is the self-check's business: the page shows it as absent
            return None

    def experiment_records(self) -> list[dict[str, Any]]:
        return experiments.read(Home(self.home).experiments)

    def transcript(self, chat: str) -> Transcript:
        versions = self.index.versions()
        layer = storage.frame_path(Home(self.home).storage, "messages", chat)
        stamp = (
            *(versions.get(t) for t in ("messages", "blocks", "threads")),
            layer.stat().st_mtime_ns if layer.is_file() else None,
        )
        with self._lock:
            kept = self._transcripts.get(chat)
            if kept is not None and kept[0] == stamp:
                return kept[1]
        transcript = self._read(chat)
        with self._lock:
            self._transcripts[chat] = (stamp, transcript)
        return transcript

    def _read(self, chat: str) -> Transcript:
        indexed = self.index.messages_for(chat)
        block_of = dict(zip(indexed["local_id"].to_list(), indexed["block_id"].to_list()))
        clock = self.clocks(chat)
        rows = self._lines(chat, indexed)
        threads = self._threads(chat)
        thread_of = {b: t.thread_id for t in threads for b in t.block_ids}
        blocks = self._blocks(chat, thread_of)
        messages = [
            Message(
                r["local_id"],
                r["position"],
                r["session"],
                r["speaker"],
                r["text"] or "",
                clock.time(r["local_id"], r["timestamp"]),
                block_of.get(r["local_id"]) or _block_at(blocks, r["position"]),
                tuple(
                    Attachment(a["kind"] or "file", a["name"] or "", a["caption"] or "") for a in r["attachments"] or ()
                ),
                bool(r["edited"]),
                bool(r["system"]),
                bool(r["bot"]),
                reactions.stored(r["reactions"]),
            )
            for r in rows.iter_rows(named=True)
        ]
        time_at = {m.position: m.timestamp for m in messages}
        blocks = [
            replace(b, start=time_at.get(b.first_position, b.start), end=time_at.get(b.last_position, b.end))
            for b in blocks
        ]  # a block's ends in the chat's zone, as its messages show
        spans = {b.block_id: (b.start, b.end) for b in blocks}
        threads = [
            replace(
                t,
                start=min((spans[b][0] for b in t.block_ids if b in spans), default=t.start),
                end=max((spans[b][1] for b in t.block_ids if b in spans), default=t.end),
            )
            for t in threads
        ]
        return Transcript(chat, messages, blocks, threads, clock.label)

    def _lines(self, chat: str, indexed: pl.DataFrame) -> pl.DataFrame:
        """Every line of the chat in file order: the stored messages layer (system lines are in it,
        not in the index), else the index's rows without the layer's details."""
        stored = self.stored("messages", chat)
        if stored is not None and "reactions" not in stored.columns:  # stored before reactions were read
            stored = stored.with_columns(pl.lit([], pl.List(schema.REACTION)).alias("reactions"))
        if stored is not None and not set(LINE_COLUMNS) - set(stored.columns):
            return stored.select(LINE_COLUMNS).sort("position")
        return indexed.select(
            "local_id", "position", "session", "speaker", pl.col("raw_text").alias("text"), "timestamp"
        ).with_columns(
            pl.lit([], pl.List(schema.ATTACHMENT)).alias("attachments"),
            pl.lit(False).alias("edited"),
            pl.lit(False).alias("system"),
            pl.lit(False).alias("bot"),
            pl.lit([], pl.List(schema.REACTION)).alias("reactions"),
        )

    def _blocks(self, chat: str, thread_of: dict[str, str]) -> list[Block]:
        stored = self.stored("l1_topics", chat)
        if stored is None:  # the index's block rows carry label, summary and keywords as one text
            stored = self.index.blocks_for(chat).with_columns(
                pl.col("text").alias("label"),
                pl.lit("").alias("summary"),
                pl.lit([]).cast(pl.List(pl.String)).alias("keywords"),
            )
        return [
            Block(
                r["block_id"],
                r["session"],
                r["first_position"],
                r["last_position"],
                _words(r["label"] or ", ".join(r["keywords"] or [])),
                r["summary"] or "",
                tuple(r["keywords"] or ()),
                r["start_time"],
                r["end_time"],
                thread_of.get(r["block_id"]),
            )
            for r in stored.sort("first_position").iter_rows(named=True)
        ]

    def _threads(self, chat: str) -> list[Thread]:
        stored = self.stored("l2_threads", chat)
        if stored is None:
            stored = self.index.threads_for(chat).with_columns(
                pl.col("text").alias("title"), pl.lit("").alias("summary")
            )
        return [
            Thread(
                r["thread_id"],
                _words(r["title"]),
                r["summary"] or "",
                tuple(r["block_ids"] or ()),
                r["start_time"],
                r["end_time"],
            )
            for r in stored.sort("start_time").iter_rows(named=True)
        ]
