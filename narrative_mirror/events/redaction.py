"""Forgotten text out of the retrieval events: stored rows whose query quotes it are rewritten in
place (the query redacted, everything else kept), then the table is compacted and its old
versions removed; spool files are overwritten in place, byte for byte the same length (the
writer of a living process reads its spool by offsets)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path

import pyarrow as pa

from narrative_mirror.events.table import TABLE, connect, quote


def redact_events(uri: str, redact: Callable[[str], str], *, chat: str | None = None, marker: str = "[forgotten]",
                  storage_options: Mapping[str, str] | None = None) -> int:
    """Redact the ``query`` of every stored event that quotes forgotten text (``redact`` changes
    it); with ``chat`` (a whole chat forgotten) every query of that chat becomes ``marker``.
    Old versions are removed, so no earlier copy stays. Returns how many events changed."""
    try:
        table = connect(uri, storage_options).open_table(TABLE)
    except ValueError:  # lancedb: "Table '...' was not found"
        return 0
    rows = table.search().select(["event_id", "chat_file", "query"]).limit(None).to_arrow()
    changed: dict[str, str] = {}
    for event_id, chat_file, query in zip(*(rows.column(n).to_pylist() for n in ("event_id", "chat_file", "query"))):
        new = marker if chat is not None and chat_file == chat else redact(query or "")
        if query is not None and new != query:
            changed[event_id] = new
    if changed:
        ids = sorted(changed)
        where = f"event_id IN ({', '.join(quote(i) for i in ids)})"
        full = table.search().where(where).limit(None).to_arrow()
        queries = pa.array([changed[i] for i in full.column("event_id").to_pylist()], pa.string())
        full = full.set_column(full.schema.get_field_index("query"), "query", queries)
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

