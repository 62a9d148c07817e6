"""Partition keys: one per chat file, derived from the file stem and validated."""

from __future__ import annotations

import re
from pathlib import Path

ARCS_SUFFIX = ".arcs.json"
_ALLOWED = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
MAX_KEY_LENGTH = 128


class PartitionKeyError(ValueError):
    pass


def validate_partition_key(key: str, source: str | None = None) -> str:
    """Return ``key`` if it is a safe partition key, else raise naming what is wrong.

    Dagster partition keys must not contain ``...``, commas or control characters; keys also
    become file names and LanceDB filter literals, so path separators, ``..`` and quotes are
    rejected too.
    """
    where = f"{source}: " if source else ""
    if not key:
        raise PartitionKeyError(f"{where}empty partition key")
    for ch in key:
        if ord(ch) < 32 or ord(ch) == 127:
            raise PartitionKeyError(f"{where}partition key {key!r} contains a control character")
        if ch in "/\\":
            raise PartitionKeyError(f"{where}partition key {key!r} contains a path separator {ch!r}")
        if ch == ",":
            raise PartitionKeyError(f"{where}partition key {key!r} contains a comma")
    if ".." in key:
        raise PartitionKeyError(f"{where}partition key {key!r} contains '..'")
    if len(key) > MAX_KEY_LENGTH:
        raise PartitionKeyError(f"{where}partition key is longer than {MAX_KEY_LENGTH} characters")
    if not _ALLOWED.fullmatch(key):
        bad = sorted({c for c in key if not re.fullmatch(r"[A-Za-z0-9_.\-]", c)})
        raise PartitionKeyError(
            f"{where}partition key {key!r} has characters outside [A-Za-z0-9_.-]: {bad} "
            "(or does not start with a letter or digit)"
        )
    return key


def partition_key_for(path: Path) -> str:
    """Partition key of a chat file: its stem, whitespace folded to ``_``, validated."""
    stem = path.name[: -len(".json")] if path.name.endswith(".json") else path.stem
    return validate_partition_key(re.sub(r"[ \t]+", "_", stem.strip()), source=str(path))


def is_chat_file(path: Path) -> bool:
    return path.is_file() and path.suffix == ".json" and not path.name.endswith(ARCS_SUFFIX)


def find_chat_files(data_dir: Path) -> tuple[dict[str, Path], list[str]]:
    """Map partition key -> chat file for every ``*.json`` chat in ``data_dir``.

    Returns ``(files, problems)``: files whose name cannot become a key are reported in
    ``problems`` instead of stopping the scan.
    """
    if not data_dir.is_dir():
        raise FileNotFoundError(f"data folder {data_dir} does not exist or is not a folder")
    files: dict[str, Path] = {}
    problems: list[str] = []
    folder = data_dir.resolve()
    for path in sorted(data_dir.iterdir()):
        if not is_chat_file(path):
            continue
        if path.is_symlink() and path.resolve().parent != folder:
            problems.append(f"{path}: links to {path.resolve()}, outside the data folder: skipped")
            continue
        try:
            key = partition_key_for(path)
        except PartitionKeyError as exc:
            problems.append(str(exc))
            continue
        if key in files:
            problems.append(f"{path}: partition key {key!r} already used by {files[key]}")
            continue
        files[key] = path
    return files, problems
