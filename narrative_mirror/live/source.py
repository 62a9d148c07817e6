"""A live chat as a source of the asset graph: its log (``<NM_HOME>/live/<chat>.jsonl``) is found
beside the data folder's chat files (``find_chats``) and read as the messages of a chat
(``live_messages``, for ``chats.load_chat``), so Dagster observes it like a file (its version is
the log's content hash: every accepted batch changes it) and builds its layers by the same rule."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl

from narrative_mirror import schema
from narrative_mirror.exports.folder import ChatSource, ImportOptions, Progress, file_version, find_folder_chats
from narrative_mirror.home import Home
from narrative_mirror.live.log import LOG_SUFFIX, LiveLog, LiveMessage

LIVE_FORMAT = "live"  # a ChatSource's format for a live chat's log
WINS_SUFFIX = ".wins"  # <live>/<chat>.wins holding "live": the live chat replaces a chat file of that name
REPLACE_HINT = 'add with --replace-file-chat (API: "replace_file_chat": true) to make the live chat replace it'


def live_chat_files(home: Path) -> dict[str, Path]:
    """Chat key -> log of every live chat of the home."""
    root = Home(Path(home)).live
    return {chat: root / f"{chat}{LOG_SUFFIX}" for chat in LiveLog(root).chats()}


def live_wins(root: Path, chat: str) -> bool:
    """Whether the user chose the live chat ``chat`` over a chat file of the same name."""
    try:
        return (Path(root) / f"{chat}{WINS_SUFFIX}").read_text(encoding="utf-8").strip() == "live"
    except OSError:
        return False


def choose_live(root: Path, chat: str) -> None:
    """Record (durably) that the live chat ``chat`` replaces a chat file of the same name."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{chat}{WINS_SUFFIX}"
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("live\n")
        handle.flush()
        os.fsync(handle.fileno())


def clash_problem(path: Path, chat: str) -> str:
    """The one line refusing a chat file and a live chat of one name."""
    return (
        f"{path}: a live chat of this home has the same name ({chat!r}): neither is built until one is renamed "
        f"or you {REPLACE_HINT}"
    )


def merge_live(chats: dict[str, ChatSource], problems: list[str], home: Path) -> None:
    """Add the home's live chats to ``chats`` (a data folder's chats). A name used by both is
    refused unless the user chose the live chat (``add --replace-file-chat``): neither is built,
    and ``problems`` says why in one line."""
    root = Home(Path(home)).live
    for chat, log in live_chat_files(home).items():
        if chat in chats and not live_wins(root, chat):
            problems.append(clash_problem(chats.pop(chat).path, chat))
            continue
        chats[chat] = ChatSource(chat, log, LIVE_FORMAT, file_version(log), chat)


def live_messages(path: Path, chat_file: str | None = None) -> tuple[pl.DataFrame, list[str]]:
    """(messages frame, speakers) of the live chat whose log is ``path`` (acknowledged messages
    only), for ``chats.load_chat``; ValueError when it has none."""
    path = Path(path)
    stem = path.name[: -len(LOG_SUFFIX)]
    messages = LiveLog(path.parent).messages(stem)
    if not messages:
        raise ValueError(f"{path.name}: the live chat has no messages")
    return record_frame(chat_file or stem, messages), list(dict.fromkeys(m.author for m in messages))


def record_frame(chat: str, messages: list[LiveMessage]) -> pl.DataFrame:
    """The live messages as the full message record (schema.MESSAGE_RECORD): times as given in UTC,
    reply links, no attachments."""
    from narrative_mirror.live.index import messages_frame

    n = len(messages)
    details = pl.DataFrame(
        {
            "utc_time": [m.timestamp for m in messages],
            "tz": ["UTC"] * n,
            "tz_source": ["live API"] * n,
            "reply_to": [m.reply_to for m in messages],
            "attachments": [[] for _ in messages],
            "edited": [False] * n,
            "system": [False] * n,
            "bot": [False] * n,
            "reactions": [[] for _ in messages],
        },
        schema={**schema.MESSAGE_DETAILS, "utc_time": pl.Datetime("us")},
    )
    details = details.with_columns(pl.col("utc_time").dt.replace_time_zone("UTC"))
    return pl.concat([messages_frame(chat, messages), details], how="horizontal")


def find_chats(
    data_dir: Path,
    options: ImportOptions = ImportOptions(),
    cache_dir: Path | None = None,
    progress: Progress | None = None,
    home: Path | None = None,
) -> tuple[dict[str, ChatSource], list[str]]:
    """The data folder's chats (chat files and exports: ``exports.folder.find_folder_chats``) and the
    live chats of ``home`` (``merge_live``; None: a library call without a home, no live chats), by
    partition key, and problem lines."""
    chats, problems = find_folder_chats(data_dir, options, cache_dir, progress)
    if home is not None:
        merge_live(chats, problems, home)
    return chats, problems
