"""Which format an export is (from its content) and the one entry point that reads any of them."""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from datetime import tzinfo
from pathlib import Path

import ijson

from narrative_mirror.exports import discord, jsonstream, messenger, signal, slack, telegram, whatsapp
from narrative_mirror.exports.archive import ExportTree, base_of
from narrative_mirror.exports.limits import check_file, open_file, sniff_text
from narrative_mirror.exports.records import FORMATS, Conversation, ExportFormatError, ProgressCallback
from narrative_mirror.exports.timezones import ZoneChoice, choose_zone

_SNIFF_BYTES = 64 * 1024


def detect(path: Path | str) -> str:
    """The format name of the export at ``path`` (a file, a folder or a zip), judged by content."""
    path = Path(path)
    if not path.is_dir():
        if not (path.exists() or path.is_symlink()):
            raise ExportFormatError(path, None, "no such file or folder")
        check_file(path)
    if path.is_dir() or zipfile.is_zipfile(path):
        tree = ExportTree(path)
        try:
            try:
                return _detect_names(path, tree.names())
            except ExportFormatError:
                if tree.is_zip and whatsapp.find_chat_in_zip(tree) is not None:
                    return "whatsapp"
                raise
        finally:
            tree.close()
    with open_file(path) as handle:
        head = handle.read(_SNIFF_BYTES)
    text = sniff_text(head, path).lstrip("\ufeff")
    lines = [line for line in text.splitlines() if line.strip()][:5]
    if signal.looks_like_text(lines):
        return "signal"
    if whatsapp.looks_like(lines):
        return "whatsapp"
    if text.lstrip().startswith(("{", "[")):
        return _detect_json(path, lines)
    raise _unknown(path, f"the first line {lines[0][:60]!r} is no known chat layout" if lines else "the file is empty")


def _unknown(path: Path, seen: str) -> ExportFormatError:
    return ExportFormatError(
        path, None, f"cannot tell the export format: {seen}; pass the format explicitly (one of {', '.join(FORMATS)})"
    )


def _detect_names(path: Path, names: list[str]) -> str:
    bases = {base_of(n) for n in names}
    if slack.find_root(names) is not None:
        return "slack"
    if any(messenger.MESSAGE_FILE.match(b) for b in bases):
        return "messenger"
    if "result.json" in bases:
        return "telegram"
    if "_chat.txt" in bases or any(b.startswith("WhatsApp Chat") and b.endswith(".txt") for b in bases):
        return "whatsapp"
    if "data.json" in bases:
        return "signal"
    raise _unknown(path, "no channels.json, message_N.json, result.json, _chat.txt or data.json inside")


def _detect_json(path: Path, lines: list[str]) -> str:
    if lines and signal.looks_like_json_line(lines[0]):
        return "signal"
    try:
        with open_file(path) as handle:
            keys = telegram.top_level_keys(handle, stop=("messages", "chats", "channel", "guild"))
        if "chats" in keys:
            return "telegram"
        if "guild" in keys or "channel" in keys:
            return "discord"
        if "participants" in keys:
            return "messenger"
        if "messages" in keys:
            with open_file(path) as handle:
                first = next(jsonstream.items(handle, "messages.item"), None)
            if isinstance(first, dict):
                if {"sender_name", "timestamp_ms"} & first.keys():
                    return "messenger"
                if {"date", "date_unixtime"} & first.keys() or first.get("type") in ("message", "service"):
                    return "telegram"
                if "author" in first and "timestamp" in first:
                    return "discord"
            if "name" in keys and "type" in keys:
                return "telegram"
    except ijson.JSONError as exc:
        raise ExportFormatError(path, None, f"invalid JSON ({str(exc).strip().splitlines()[0]})") from exc
    if _text_is_array(lines):
        raise _unknown(path, "a JSON array (a single Slack day file? pass the export's folder or zip)")
    raise _unknown(path, f"a JSON object with keys {keys[:8]}")


def _text_is_array(lines: list[str]) -> bool:
    return bool(lines) and lines[0].lstrip().startswith("[")


def read_export(
    path: Path | str,
    format: str | None = None,
    tz: str | tzinfo | None = None,
    day_first: bool | None = None,
    *,
    machine_tz: str | tzinfo | None = None,
    on_progress: ProgressCallback | None = None,
) -> Iterator[Conversation]:
    """Every conversation of the export at ``path``, one at a time (format and zone checked now).

    ``format`` forces a reader (else :func:`detect`); ``tz`` is the zone for formats that write
    local times (recorded as "--tz"), ``machine_tz`` the caller's machine zone used when ``tz`` is
    None (recorded as "machine"); ``day_first`` settles WhatsApp's day/month order when the file
    cannot. ``on_progress(done, total_or_None, label)`` is called after each conversation.
    """
    path = Path(path)
    if format is not None and format not in FORMATS:
        raise ValueError(f"unknown export format {format!r} (one of {', '.join(FORMATS)})")
    chosen = format or detect(path)
    zone = choose_zone(tz, machine_tz)
    return _read(path, chosen, zone, day_first, on_progress)


def _read(
    path: Path, chosen: str, zone: ZoneChoice, day_first: bool | None, on_progress: ProgressCallback | None
) -> Iterator[Conversation]:
    if chosen == "whatsapp":
        yield from _single(whatsapp.read(_find(path, ("_chat.txt", ".txt"), "WhatsApp"), zone, day_first), on_progress)
    elif chosen == "signal":
        yield from _single(signal.read(_find(path, ("data.json", ".txt"), "Signal"), zone), on_progress)
    elif chosen == "discord":
        yield from _single(discord.read(path), on_progress)
    elif chosen == "telegram":
        yield from telegram.read(_find(path, ("result.json",), "Telegram"), zone, on_progress)
    elif chosen == "slack":
        yield from slack.read(path, zone, on_progress)
    else:
        yield from messenger.read(path, zone, on_progress)


def _single(conversations: Iterator[Conversation], on_progress: ProgressCallback | None) -> Iterator[Conversation]:
    for conversation in conversations:
        yield conversation
        if on_progress is not None:
            on_progress(1, 1, conversation.title)


def _find(path: Path, wanted: tuple[str, ...], what: str) -> Path:
    """The chat file inside a folder export (a file or a zip is read as given)."""
    if not path.is_dir():
        return path
    tree = ExportTree(path)
    for suffix in wanted:
        found = [name for name in tree.names() if base_of(name) == suffix or base_of(name).endswith(suffix)]
        if len(found) == 1:
            return check_file(path / found[0], path)
    raise ExportFormatError(path, None, f"expected one {what} chat file ({' or '.join(wanted)}) in the folder")


__all__ = ["detect", "read_export"]
