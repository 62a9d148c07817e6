"""The agent's tuned thresholds and budgets: ``config/agent.toml``, read and checked when it changes.

Modules read a setting when they use it (``setting``), never at import: an override folder or an
edited agent.toml applies to the next call, without a restart."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path

from narrative_mirror import config_check, settings

FILE = "agent.toml"

# Every setting the agent reads, by section, with its type (a float setting may be written as an
# integer). Each profile under [profiles.<name>] has every key of PROFILE_SETTINGS.
SETTINGS: dict[str, dict[str, type]] = {
    "selection": {
        "relative_score": float,
        "min_grade": float,
        "cover_min_grade": float,
        "variant_weight": float,
        "span_block_relative": float,
        "leaf_context": int,
    },
    "grading": {"score_weight": float, "target_weight": float, "must_have_min_grade": float},
    "answer": {
        "support_min": float,
        "relevance_min": float,
        "span_words": int,
        "look_at": int,
        "list_messages": int,
        "asking_penalty": float,
    },
    "narrative": {
        "min_ids": int,
        "max_ids": int,
        "max_phases": int,
        "phase_gap_hours": float,
        "story_ids": int,
        "preview": int,
        "soft_max_ids": int,
    },
}
PROFILE_SETTINGS: dict[str, type] = {
    "max_rounds": int,
    "first_search": int,
    "max_evidence_fetches": int,
    "max_calls": int,
    "rewrite_candidates": int,
    "min_top5_relevance": float,
    "min_must_have_hits": int,
    "deadline_s": float,
    "story_blocks": int,
}


def validate(config: Mapping) -> dict:
    """``config`` when every setting of ``SETTINGS`` and every profile's are there with their types;
    else a ValueError naming the setting."""
    for name, wanted in SETTINGS.items():
        config_check.section(FILE, name, config.get(name), wanted)
    profiles = config.get("profiles")
    if not isinstance(profiles, Mapping) or not profiles:
        raise config_check.config_error(FILE, "profiles", "missing (at least one [profiles.<name>] table)")
    for name, profile in profiles.items():
        config_check.section(FILE, f"profiles.{name}", profile, PROFILE_SETTINGS)
    return dict(config)


def agent_config() -> dict:
    """agent.toml in effect now (the override folder's, else the packaged one), validated; read
    again only when the file in effect or its modification time changes."""
    path = settings.config_path("agent")
    return _validated(path, path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _validated(path: Path, mtime_ns: int) -> dict:
    del mtime_ns  # part of the cache key only: a rewritten file is read again
    return validate(settings.read_config_file(path))


def setting(section: str, key: str):
    """One agent.toml setting as in effect now (``agent_config()[section][key]``)."""
    return agent_config()[section][key]


def module_settings(module: str, names: Mapping[str, Callable[[], object]]) -> Callable[[str], object]:
    """A module ``__getattr__`` (PEP 562) that reads the module's named settings when asked, so
    ``module.NAME`` follows the config file like the module's own calls do."""

    def __getattr__(name: str) -> object:
        if name in names:
            return names[name]()
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
