"""Versions of the files the memory is built from: chats, ARC case files, config, prompts.

A version is the content hash of the file, so a touched but unchanged file keeps its version
and any edit gets a new one (embedding.toml: of the settings its vectors depend on). A chat of an export (a folder or zip too) is versioned by its own
messages and the reading options (narrative_mirror/exports/folder.py), so a newer export changes
only the conversations that changed. The Dagster layer records these as data versions of its source
assets; the command line compares them with a stamp to answer without starting Dagster.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from narrative_mirror import settings
from narrative_mirror.embedding import vector_settings
from narrative_mirror.exports.folder import (
    ImportOptions,
    Progress,
    file_version,  # a file's content hash, or a folder export's
)
from narrative_mirror.home import Home
from narrative_mirror.live.source import find_chats

ABSENT = "absent"  # the version of an ARC file that does not exist (a chat without arc cases)
CONFIG_NAMES = ("embedding", "layers", "retrieval", "agent", "split", "evaluation")


def chat_file_versions(
    data_dir: Path,
    options: ImportOptions | None = None,
    cache_dir: Path | None = None,
    progress: Progress | None = None,
    home: Path | None = None,
) -> tuple[dict[str, str], dict[str, Path], list[str]]:
    """(version per partition key, file per key, problems) of the chats in ``data_dir``: chat
    files and the conversations of exports (``options``: how exports are read; ``cache_dir``:
    where what a parse of an export found is kept) and the live chats of ``home``."""
    chats, problems = find_chats(data_dir, options or ImportOptions(), cache_dir, progress, home)
    return {k: c.version for k, c in chats.items()}, {k: c.path for k, c in chats.items()}, problems


def arc_file_version(arcs_dir: Path | None, chat_file: str) -> str:
    from narrative_mirror.arcs import arcs_file_for  # (polars) only where ARC files are looked at

    path = arcs_file_for(arcs_dir, chat_file)
    return file_version(path) if path else ABSENT


def config_versions(home: Home | None = None) -> dict[str, str]:
    """The config files' versions; embedding.toml's includes the current adaptation of ``home``
    (None: a library call without a home, no adaptation)."""
    from narrative_mirror.adaptation import store as adaptation

    versions = {name: file_version(settings.config_path(name)) for name in CONFIG_NAMES}
    # embedding.toml by the settings its vectors depend on: an edit to [adaptation] while it is off
    # (or to a comment) re-embeds nothing
    embedding = settings.load_config("embedding")
    settings_digest = hashlib.sha256(json.dumps(vector_settings(embedding), sort_keys=True).encode()).hexdigest()[:16]
    versions["embedding"] = adaptation.embedding_version(
        settings_digest, embedding, home.adaptation if home is not None else None
    )
    return versions


def packaged_prompt_names() -> list[str]:
    return sorted(p.stem for p in settings.DEFAULT_PROMPTS_DIR.glob("*.txt"))


def prompt_versions() -> dict[str, str]:
    return {name: file_version(settings.prompt_path(name)) for name in packaged_prompt_names()}
