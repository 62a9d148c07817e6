"""Forgotten text out of the retrieval events: stored rows whose client-chosen fields (query,
session id, user id) quote it, or whose returned/cited ids name a forgotten message, are
rewritten in place (those fields redacted, a redacted query's stored vector dropped, everything
else kept), then the table is compacted and its old
versions removed; spool files are overwritten in place, byte for byte the same length (the
writer of a living process reads its spool by offsets)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path

import pyarrow as pa

from narrative_mirror.events.table import TABLE, connect, quote

# What a client wrote into an event (the user part of ``user_id`` follows the token's "<namespace>/")
CLIENT_TEXT = ("query", "session_id", "user_id")
MESSAGE_ID_LISTS = ("returned_ids", "cited_ids")


def _redacted_event(
    row: dict, redact: Callable[[str], str], chat: str | None, ids: Mapping[str, set[str]], marker: str
) -> dict:
    """``row`` with the forgotten text out of every field a client chose and the forgotten
    messages' ids out of its id lists; a whole chat's events (``chat``) keep no client text."""
    whole = chat is not None and row.get("chat_file") == chat
    new = dict(row)
    for name in CLIENT_TEXT:
        value = row.get(name)
        if value is None:
            continue
        namespace, mine = value.split("/", 1) if name == "user_id" and "/" in value else ("", value)
        mine = marker if whole else redact(mine)
        new[name] = f"{namespace}/{mine}" if namespace else mine
    gone = None if whole else ids.get(row.get("chat_file"))
    if whole or gone:
        for name in MESSAGE_ID_LISTS:
            if row.get(name) is not None:
                new[name] = [marker if gone is None or i in gone else i for i in row[name]]
    return new


def redact_events(
    uri: str,
    redact: Callable[[str], str],
    *,
    chat: str | None = None,
    marker: str = "[forgotten]",
    storage_options: Mapping[str, str] | None = None,
    forgotten_ids: Mapping[str, set[str]] | None = None,
) -> int:
    """Redact every stored event that holds forgotten text in a field its client chose (query,
    session id, the user part of the user id: ``redact`` changes it) or a forgotten message's id
    (``forgotten_ids``: {chat: local ids}) in its returned or cited ids; with ``chat`` (a whole
    chat forgotten) each of that chat's events keeps none of those. Old versions are removed, so
    no earlier copy stays. Returns how many events changed."""
    try:
        table = connect(uri, storage_options).open_table(TABLE)
    except ValueError:  # lancedb: "Table '...' was not found"
        return 0
    ids = {k: set(v) for k, v in (forgotten_ids or {}).items()}
    columns = ["event_id", "chat_file", *CLIENT_TEXT, *MESSAGE_ID_LISTS]
    rows = table.search().select(columns).limit(None).to_arrow().to_pylist()
    changed: dict[str, dict] = {}
    by_id = {row["event_id"]: row for row in rows}
    for row in rows:
        new = _redacted_event(row, redact, chat, ids, marker)
        if new != row:
            changed[row["event_id"]] = new
    if changed:
        where = f"event_id IN ({', '.join(quote(i) for i in sorted(changed))})"
        full = table.search().where(where).limit(None).to_arrow()
        order = full.column("event_id").to_pylist()
        for name in (*CLIENT_TEXT, *MESSAGE_ID_LISTS):
            at = full.schema.get_field_index(name)
            full = full.set_column(at, name, pa.array([changed[i][name] for i in order], full.schema.field(name).type))
        if "query_vector" in full.column_names:  # the vector of a redacted query would still tell it
            at = full.schema.get_field_index("query_vector")
            vectors = full.column("query_vector").to_pylist()
            full = full.set_column(
                at,
                "query_vector",
                pa.array(
                    [None if changed[i]["query"] != by_id[i]["query"] else v for i, v in zip(order, vectors)],
                    full.schema.field("query_vector").type,
                ),
            )
        full = full.select([n for n in full.column_names if not n.startswith("_")])
        table.merge_insert("event_id").when_matched_update_all().execute(full)
    compact_events(uri, storage_options)
    return len(changed)


def compact_events(uri: str, storage_options: Mapping[str, str] | None = None) -> int:
    """Compact the events table and remove every old version (their files may quote what was
    redacted); returns the versions removed."""
    try:
        table = connect(uri, storage_options).open_table(TABLE)
    except ValueError:
        return 0
    before = len(table.list_versions())
    table.optimize(cleanup_older_than=timedelta(0))
    return before - len(table.list_versions())


def redact_spool(folder: Path, same_length: Callable[[bytes], bytes]) -> int:
    """Overwrite forgotten text in the spool files under ``folder`` in place, at the same
    length; returns the files changed."""
    changed = 0
    if not Path(folder).is_dir():
        return 0
    for path in sorted(Path(folder).glob("*.jsonl")):
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:
            continue
        try:
            data = os.pread(fd, os.fstat(fd).st_size, 0)
            new = same_length(data)
            if new != data and len(new) == len(data):
                os.pwrite(fd, new, 0)
                os.fsync(fd)
                changed += 1
        finally:
            os.close(fd)
    return changed
