"""The agent's tuned thresholds and budgets: ``config/agent.toml``, read and checked once."""

from __future__ import annotations

import functools
from collections.abc import Mapping

from narrative_mirror import settings

# Every setting the agent reads, by section, with its type (a float setting may be written as an
# integer). Each profile under [profiles.<name>] has every key of PROFILE_SETTINGS.
SETTINGS: dict[str, dict[str, type]] = {
    "selection": {"relative_score": float, "min_grade": float, "cover_min_grade": float, "variant_weight": float,
                  "span_block_relative": float, "leaf_context": int},
    "grading": {"score_weight": float, "target_weight": float, "must_have_min_grade": float},
    "answer": {"support_min": float, "relevance_min": float, "span_words": int},
    "narrative": {"min_ids": int, "max_ids": int, "max_phases": int, "phase_gap_hours": float, "story_ids": int,
                  "preview": int, "soft_max_ids": int},
}
PROFILE_SETTINGS: dict[str, type] = {
    "max_rounds": int, "first_search": int, "max_evidence_fetches": int, "max_calls": int,
    "rewrite_candidates": int, "min_top5_relevance": float, "min_must_have_hits": int, "deadline_s": float,
    "story_blocks": int,
}


def _check(section: Mapping, name: str, wanted: Mapping[str, type]) -> None:
    if not isinstance(section, Mapping):
        raise ValueError(f"agent.toml: [{name}] must be a table, got {section!r}")
    for key, kind in wanted.items():
        if key not in section:
            raise ValueError(f"agent.toml: missing setting {name}.{key}")
        value = section[key]
        allowed = (int, float) if kind is float else (kind,)
        if isinstance(value, bool) or not isinstance(value, allowed):
            raise ValueError(f"agent.toml: {name}.{key} must be {'a number' if kind is float else 'an integer'}, "
                             f"got {value!r}")


def validate(config: Mapping) -> dict:
    """``config`` when every setting of ``SETTINGS`` and every profile's are there with their types;
    else a ValueError naming the setting."""
    for name, wanted in SETTINGS.items():
        _check(config.get(name), name, wanted)
    profiles = config.get("profiles")
    if not isinstance(profiles, Mapping) or not profiles:
        raise ValueError("agent.toml: missing setting profiles (at least one [profiles.<name>] table)")
    for name, profile in profiles.items():
        _check(profile, f"profiles.{name}", PROFILE_SETTINGS)
    return dict(config)


@functools.cache
def agent_config() -> dict:
    """agent.toml (the NM_CONFIG_DIR override, else the packaged one), validated; read once."""
    return validate(settings.load_config("agent"))
