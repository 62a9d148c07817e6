"""The live memory's ``add`` command: messages as JSON lines, to a live chat's log and index
(``forget``: ``cli.commands.forget``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def add_live_parsers(sub) -> None:
    """Register ``add`` on the command line's subparsers."""
    p = sub.add_parser(
        "add",
        help="add messages (JSON lines: id, author, text, timestamp, reply_to) to a live chat; "
        "durable and searchable when it returns",
    )
    p.add_argument("--chat", required=True, help="the live chat (created by its first message)")
    p.add_argument("--file", type=Path, default=None, help="JSON lines to read (default: standard input)")
    p.add_argument(
        "--replace-file-chat",
        action="store_true",
        help="a chat file's chat has this name: the live chat replaces it (its rows leave the index now, "
        "and every build reads the live chat for that name); without it such an add is refused",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_add)


def read_messages(lines) -> list[dict]:
    """One message object per non-empty line; ``MessageError`` names the line that is not one."""
    from narrative_mirror.live.log import MessageError

    messages = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            messages.append(json.loads(line))
        except ValueError:
            raise MessageError(f"line {number}", "not a JSON object") from None
    if not messages:
        raise MessageError("input", "no messages (one JSON object per line)")
    return messages


def cmd_add(args) -> dict:
    from cli.server_client import through_server
    from cli.session import memory_of

    if getattr(args, "messages", None) is not None:  # in the server: the caller read them
        messages = args.messages
    elif args.file is not None:
        with open(args.file, encoding="utf-8") as handle:
            messages = read_messages(handle)
    else:
        messages = read_messages(sys.stdin)
    if (result := through_server(args, messages=messages)) is not None:
        return result
    return memory_of(args).add(args.chat, messages, replace_file_chat=args.replace_file_chat)
