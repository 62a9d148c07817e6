"""The ``chats`` command: which chats a data folder holds, and the home's live chats (format
``live``), with participants, messages, date range, questions and whether each one's memory is
built, and why not. Plain Python: it reads the chat
files and the freshness stamps (cli/stamp.py), never starting Dagster or loading the embedder."""

from __future__ import annotations

import json
from pathlib import Path

NOT_BUILT = "never built in this home: `build` builds it, and so does the first question about it"
SOURCE_LABELS = {"chat_file": "the chat file", "config": "the config files", "prompts": "the prompts",
                 "code": "the project's code"}


def arcs_line(data_dir: Path, arcs_dir: Path | None) -> str | None:
    """One line when ``data_dir`` has no ARC cases to go with it (None when it has): without
    it, ARC cases would be dropped without a word."""
    if arcs_dir is None:
        return (f"no ARC cases for {data_dir}: no *.arcs.json in it and no {data_dir.name}_arcs folder beside it "
                "(--arcs or NM_ARCS_DIR names one); ARC evaluation has no cases")
    if not arcs_dir.is_dir():
        return f"ARC folder {arcs_dir} does not exist; ARC evaluation has no cases"
    return None


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
    now = stamp.sources_now(chat_path)
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


def chat_row(home: Path, chat: str, path: Path) -> dict:
    """One chat file: what it holds and whether its memory is built (``why_not`` when not)."""
    from narrative_mirror.chats import load_chat

    try:
        chat_data = load_chat(path, chat)
    except (ValueError, OSError) as exc:  # ChatFormatError and unreadable files
        reason = " ".join(str(exc).split())
        return {"chat": chat, "file": str(path), "format": None, "participants": [], "messages": 0, "questions": 0,
                "first": None, "last": None, "built": False, "why_not": f"cannot be read: {reason}"}
    times = chat_data.messages["timestamp"].drop_nulls()
    why_not = _stale_reason(home, chat, path)
    return {"chat": chat, "file": str(path), "format": chat_data.format, "participants": chat_data.speakers,
            "messages": chat_data.messages.height, "questions": len(chat_data.qa),
            "first": times.min().date().isoformat() if len(times) else None,
            "last": times.max().date().isoformat() if len(times) else None,
            "built": why_not is None, "why_not": why_not}


def cmd_chats(args) -> dict:
    from narrative_mirror.keys import find_chat_files
    from narrative_mirror.live.source import LIVE_FOLDER, clash_problem, live_chat_files, live_wins
    from cli.server_client import through_server
    from resources import environment

    if (result := through_server(args)) is not None:
        return result
    data_dir = args.data.resolve() if args.data else environment.data_dir()
    arcs_dir = args.arcs.resolve() if args.arcs else environment.arcs_dir(data_dir)
    files, problems = find_chat_files(data_dir)
    home = environment.nm_home()
    live_root = home / LIVE_FOLDER
    for chat, log in live_chat_files(home).items():  # the build's rule (live.source.merge_live)
        if chat in files and not live_wins(live_root, chat):
            problems.append(clash_problem(files.pop(chat), chat))
        else:
            files[chat] = log
    if not files and not problems:
        raise FileNotFoundError(f"no chat files (*.json) in {data_dir} and no live chats in {live_root}")
    rows = [chat_row(home, chat, path) for chat, path in sorted(files.items())]
    arcs = arcs_line(data_dir, arcs_dir)
    return {"data": str(data_dir), "arcs": str(arcs_dir) if arcs_dir else None, "home": str(home),
            "chats": rows, "problems": problems, "warnings": [arcs] if arcs else []}
