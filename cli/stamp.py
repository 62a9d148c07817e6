"""Freshness stamps: the question path's way to skip Dagster when nothing changed.

After the command line has brought a chat's memory up to date (Dagster's freshness rule
requested nothing more), it writes a stamp: the versions of everything that could make that
memory stale (the chat file, the config files, the prompts, the project's code) and the
files holding its stored layers. A question about that chat recomputes these in milliseconds;
if they match, the memory is as fresh as when Dagster last said so and the question is answered
directly. Anything different (an edit, a code change, a layer rebuilt in the UI) sends it through
Dagster again, and so does damage: a stored layer that is no longer a whole parquet file (its
footer, not a full read) or an index holding other row counts for the chat than the build wrote
(one count per table), so that Dagster's side (cli/integrity.py) repairs it. Plain Python:
importing this module imports no Dagster.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

from narrative_mirror import sources as source_versions
from narrative_mirror.home import Home
from narrative_mirror.storage import frame_path, frame_problem

PROJECT_ROOT = Path(__file__).resolve().parents[1]
# The code the stored memory depends on (the command line itself is not part of it).
CODE_PACKAGES = ("narrative_mirror", "assets", "resources", "jobs", "instance", "definitions")
# The stored outputs a question reads, besides the LanceDB index they are copied into.
STORED_ASSETS = ("messages", "message_embeddings", "l1_topics", "l15_signals", "l2_threads")


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """One hash over the project's Python sources (a conservative stand-in for the assets' code
    versions: any code change goes through Dagster once, which knows what it affects). Taken
    once per process: a command runs the code it started with."""
    h = hashlib.sha256()
    for package in CODE_PACKAGES:
        for path in sorted((PROJECT_ROOT / package).rglob("*.py")):
            h.update(str(path.relative_to(PROJECT_ROOT)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:32]


def stamp_path(home: Path, chat: str) -> Path:
    return Home(home).freshness / f"{chat}.json"


def sources_now(home: Path, chat_path: Path) -> dict:
    """Versions of the inputs of a chat's memory in ``home``, as they are now."""
    return {
        "chat_file": source_versions.file_version(chat_path),
        "chat_path": str(chat_path),
        "config": source_versions.config_versions(Home.at(home)),
        "prompts": source_versions.prompt_versions(),
        "code": code_digest(),
    }


def outputs_now(home: Path, chat: str) -> dict:
    """(mtime, size) of each stored layer of the chat; None where one is missing."""
    outputs = {}
    for asset in STORED_ASSETS:
        try:
            info = frame_path(Home(home).storage, asset, chat).stat()
            outputs[asset] = [info.st_mtime_ns, info.st_size]
        except FileNotFoundError:
            outputs[asset] = None
    return outputs


def is_fresh(home: Path, chat: str, chat_path: Path) -> bool:
    path = stamp_path(home, chat)
    try:
        stamp = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return False
    index_rows = stamp.pop("index_rows", None) if isinstance(stamp, dict) else None
    if stamp != {"sources": sources_now(home, chat_path), "outputs": outputs_now(home, chat)} or not index_rows:
        return False
    return outputs_intact(home, chat) and index_intact(chat, index_rows)


def outputs_intact(home: Path, chat: str) -> bool:
    """Each stored layer of the chat is a whole parquet file (magic at both ends)."""
    return all(frame_problem(frame_path(Home(home).storage, asset, chat)) is None for asset in STORED_ASSETS)


def index_intact(chat: str, index_rows: dict) -> bool:
    """The index holds the chat's rows the build wrote (one count per table); False when it cannot
    be read at all."""
    from resources import runtime

    try:
        store = runtime.index_from_environment()
        return all(store.chat_row_count(table, chat) == rows for table, rows in index_rows.items())
    except (RuntimeError, OSError, ValueError):
        return False


def write(home: Path, chat: str, sources: dict, index_rows: dict[str, int]) -> None:
    """Record that the memory of ``chat`` is fresh for ``sources`` (taken BEFORE the build: if a
    file changed during it, the next question goes through Dagster again), with the index rows
    per table the build recorded for it."""
    path = stamp_path(home, chat)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(
        json.dumps({"sources": sources, "outputs": outputs_now(home, chat), "index_rows": index_rows}), encoding="utf-8"
    )
    os.replace(tmp, path)
