"""Train/test assignment of chat files: a pure function of the key and ``split.toml``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from narrative_mirror import settings

TRAIN, TEST = "train", "test"


@dataclass(frozen=True)
class SplitAssignment:
    chat_file: str
    split: str
    configured: bool  # False: matched no pattern and defaulted to train


def load_split_config() -> dict:
    cfg = settings.load_config("split").get("split", {})
    for name in (TRAIN, TEST):
        patterns = cfg.get(name, [])
        if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
            raise ValueError(f"{settings.config_path('split')}: split.{name} must be a list of glob strings")
    return cfg


def assign(chat_file: str, config: dict | None = None) -> SplitAssignment:
    """Test patterns win over train patterns; unmatched files count as train (and are reported)."""
    cfg = load_split_config() if config is None else config
    if any(fnmatchcase(chat_file, p) for p in cfg.get(TEST, [])):
        return SplitAssignment(chat_file, TEST, True)
    if any(fnmatchcase(chat_file, p) for p in cfg.get(TRAIN, [])):
        return SplitAssignment(chat_file, TRAIN, True)
    return SplitAssignment(chat_file, TRAIN, False)


def assign_all(chat_files: Iterable[str], config: dict | None = None) -> list[SplitAssignment]:
    cfg = load_split_config() if config is None else config
    return [assign(k, cfg) for k in sorted(chat_files)]


def keys_in(split: str, chat_files: Iterable[str], config: dict | None = None) -> list[str]:
    return [a.chat_file for a in assign_all(chat_files, config) if a.split == split]
