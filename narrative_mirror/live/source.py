"""A live chat as a source of the asset graph: its log (``<NM_HOME>/live/<chat>.jsonl``) is found
beside the data folder's chat files (``find_chats``) and read as the messages of a chat
(``live_messages``, for ``chats.load_chat``), so Dagster observes it like a file (its version is
the log's content hash: every accepted batch changes it) and builds its layers by the same rule."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from narrative_mirror import settings
from narrative_mirror.keys import find_chat_files
from narrative_mirror.live.index import messages_frame
from narrative_mirror.live.log import LOG_SUFFIX, LiveLog

LIVE_FOLDER = "live"


def live_root(home: Path | None = None) -> Path | None:
    """``<NM_HOME>/live``; None in a process that was handed no state folder (a library call)."""
    if home is None:
        try:
            home = settings.state_home()
        except RuntimeError:
            return None
    return Path(home) / LIVE_FOLDER


def live_chat_files(home: Path | None = None) -> dict[str, Path]:
    """Chat key -> log of every live chat of the home."""
    root = live_root(home)
    return {chat: root / f"{chat}{LOG_SUFFIX}" for chat in LiveLog(root).chats()} if root is not None else {}


def merge_live(files: dict[str, Path], problems: list[str], home: Path | None = None) -> None:
    """Add the home's live chats to ``files`` (a data folder's chat files). A name used by both is
    refused: neither is built, and ``problems`` says why (rename one of them)."""
    for chat, log in live_chat_files(home).items():
        if chat in files:
            problems.append(f"{files.pop(chat)}: a live chat of this home has the same name ({chat!r}): neither is "
                            "built until one is renamed")
            continue
        files[chat] = log


def live_messages(path: Path, chat_file: str | None = None) -> tuple[pl.DataFrame, list[str]]:
    """(messages frame, speakers) of the live chat whose log is ``path`` (acknowledged messages
    only), for ``chats.load_chat``; ValueError when it has none."""
    path = Path(path)
    stem = path.name[: -len(LOG_SUFFIX)]
    messages = LiveLog(path.parent).messages(stem)
    if not messages:
        raise ValueError(f"{path.name}: the live chat has no messages")
    return messages_frame(chat_file or stem, messages), list(dict.fromkeys(m.author for m in messages))


def find_chats(data_dir: Path) -> tuple[dict[str, Path], list[str]]:
    """``keys.find_chat_files`` of ``data_dir`` and the home's live chats (``merge_live``)."""
    files, problems = find_chat_files(data_dir)
    merge_live(files, problems)
    return files, problems
