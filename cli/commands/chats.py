"""The ``chats`` command: every chat ``build`` would see (chat files, each conversation of each
export, the home's live chats), by key, with its name, participants, messages, date range in its
own zone, questions and whether its memory is built, and why not. Plain Python: it reads the
chats, the freshness stamps (cli/stamp.py) and the failure records (cli/broken.py), never
starting Dagster or loading the embedder."""

from __future__ import annotations

import json
from pathlib import Path

NOT_BUILT = "never built in this home: `build` builds it, and so does the first question about it"
SOURCE_LABELS = {
    "chat_file": "the chat file",
    "config": "the config files",
    "prompts": "the prompts",
    "code": "the project's code",
}


def _stale_reason(home: Path, chat: str, chat_path: Path) -> str | None:
    """None when the chat's memory is built and fresh; else why not, in words."""
    from cli import stamp

    try:
        recorded = json.loads(stamp.stamp_path(home, chat).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return NOT_BUILT
    except (json.JSONDecodeError, OSError):
        return "its freshness record is unreadable: the next command rebuilds what is stale"
    sources = recorded.get("sources", {}) if isinstance(recorded, dict) else {}
    now = stamp.sources_now(home, chat_path)
    if sources.get("chat_path") != now["chat_path"]:
        return f"built from another file ({sources.get('chat_path')}): the next command rebuilds it"
    changed = [label for what, label in SOURCE_LABELS.items() if sources.get(what) != now[what]]
    if changed:
        return f"{', '.join(changed)} changed since it was built: the next command rebuilds it"
    if recorded.get("outputs") != stamp.outputs_now(home, chat) or not stamp.outputs_intact(home, chat):
        return "its stored layers changed or are damaged since it was built: the next command checks and rebuilds them"
    index_rows = recorded.get("index_rows")
    if not index_rows or not stamp.index_intact(chat, index_rows):
        return "its index rows differ from what the build wrote: the next command re-indexes it"
    return None


def chat_row(home: Path, chat: str, path: Path, loaded=None, name: str = "") -> dict:
    """One chat: what it holds and whether its memory is built (``why_not`` when not).
    ``loaded``: its ``Chat`` (or the error reading it) when the caller read it already."""
    from narrative_mirror.chats import load_chat

    try:
        if isinstance(loaded, Exception):
            raise loaded
        chat_data = loaded if loaded is not None else load_chat(path, chat)
    except (ValueError, OSError) as exc:  # ChatFormatError, ExportFormatError and unreadable files
        reason = " ".join(str(exc).split())
        return {
            "chat": chat,
            "name": name or chat,
            "file": str(path),
            "format": None,
            "participants": [],
            "messages": 0,
            "questions": 0,
            "first": None,
            "last": None,
            "tz": None,
            "built": False,
            "why_not": f"cannot be read: {reason}",
        }
    first, last = date_range(chat_data)
    why_not = _failed(home, chat) or _stale_reason(home, chat, path)
    return {
        "chat": chat,
        "name": name or chat,
        "file": str(path),
        "format": chat_data.format,
        "participants": chat_data.speakers,
        "messages": chat_data.messages.height,
        "questions": len(chat_data.qa),
        "first": first,
        "last": last,
        "tz": chat_data.tz or None,
        "built": why_not is None,
        "why_not": why_not,
    }


def _failed(home: Path, chat: str) -> str | None:
    from cli.broken import BrokenChats

    line = BrokenChats(home).last_failure(chat)
    return f"its last build failed: {line}" if line else None


def date_range(chat) -> tuple[str | None, str | None]:
    """First and last day of the chat as its people saw them: the stored ``timestamp`` is each
    message's wall-clock time in the zone it records (exports/frames.py)."""
    times = chat.messages["timestamp"].drop_nulls()
    if not len(times):
        return None, None
    return times.min().date().isoformat(), times.max().date().isoformat()


def read_chats(sources: dict, options) -> dict:
    """The ``Chat`` of each source (or the error reading it), reading each export once."""
    from dataclasses import replace

    from narrative_mirror.chats import load_chat
    from narrative_mirror.exports.folder import NATIVE
    from narrative_mirror.exports.frames import ExportChatError, conversation_chat
    from narrative_mirror.exports.reader import read_export
    from narrative_mirror.exports.records import ExportFormatError
    from narrative_mirror.live.source import LIVE_FORMAT

    loaded: dict = {}
    exports: dict = {}
    for key, source in sources.items():
        if source.format in (NATIVE, LIVE_FORMAT):
            try:
                loaded[key] = load_chat(source.path, key)
            except (ValueError, OSError) as exc:
                loaded[key] = exc
        else:
            exports.setdefault((source.path, source.format), []).append(source)
    for (path, fmt), chats in exports.items():
        try:
            for conversation in read_export(path, fmt, options.tz, options.day_first, machine_tz=options.machine_tz):
                for source in (s for s in chats if s.is_conversation(conversation)):
                    try:
                        loaded[source.key] = conversation_chat(
                            replace(conversation, key=source.key), options, path=path
                        )
                    except (ExportFormatError, ValueError) as exc:
                        loaded[source.key] = ExportChatError(" ".join(str(exc).split()))
        except (ExportFormatError, OSError, ValueError) as exc:
            for source in chats:
                loaded.setdefault(source.key, ExportChatError(" ".join(str(exc).split())))
    return loaded


def cmd_chats(args) -> dict:
    """Every chat ``build`` would see (chat files, each conversation of each export, live chats)."""
    from cli.server_client import through_server

    if (result := through_server(args)) is not None:
        return result
    from cli.session import arcs_line, chat_sources
    from narrative_mirror.home import Home
    from resources import environment

    data_dir, options, sources, problems = chat_sources(args)
    arcs_dir = args.arcs.resolve() if args.arcs else environment.arcs_dir(data_dir)
    home = environment.nm_home()
    if not sources and not problems:
        raise FileNotFoundError(
            f"no chats (chat files or chat exports) in {data_dir} and no live chats in {Home(home).live}"
        )
    loaded = read_chats(sources, options)
    rows = [chat_row(home, key, source.path, loaded.get(key), source.title) for key, source in sorted(sources.items())]
    arcs = arcs_line(data_dir, arcs_dir, [source.format for source in sources.values()])
    return {
        "data": str(data_dir),
        "arcs": str(arcs_dir) if arcs_dir else None,
        "home": str(home),
        "chats": rows,
        "problems": problems,
        "warnings": [arcs] if arcs else [],
    }
