"""Versions of the files the memory is built from: chat files, ARC case files, config, prompts.

A version is the content hash of the file, so a touched but unchanged file keeps its version
and any edit gets a new one. The Dagster layer records these as data versions of its source
assets; the command line compares them with a stamp to answer without starting Dagster.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from narrative_mirror import settings
from narrative_mirror.live.source import find_chats

ABSENT = "absent"  # the version of an ARC file that does not exist (a chat without arc cases)
CONFIG_NAMES = ("embedding", "layers", "retrieval", "agent", "split", "evaluation")


def file_version(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:32]


def chat_file_versions(data_dir: Path) -> tuple[dict[str, str], dict[str, Path], list[str]]:
    """(version per partition key, file per key, problems) of the chat files in ``data_dir``."""
    files, problems = find_chats(data_dir)  # the data folder's chat files and the home's live chats
    return {key: file_version(path) for key, path in files.items()}, files, problems


def arc_file_version(arcs_dir: Path | None, chat_file: str) -> str:
    from narrative_mirror.arcs import arcs_file_for  # (polars) only where ARC files are looked at

    path = arcs_file_for(arcs_dir, chat_file)
    return file_version(path) if path else ABSENT


def config_versions() -> dict[str, str]:
    return {name: file_version(settings.config_path(name)) for name in CONFIG_NAMES}


def prompt_names() -> list[str]:
    return sorted(p.stem for p in settings.DEFAULT_PROMPTS_DIR.glob("*.txt"))


def prompt_versions() -> dict[str, str]:
    return {name: file_version(settings.prompt_path(name)) for name in prompt_names()}
