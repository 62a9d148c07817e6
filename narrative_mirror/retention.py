"""Retention of what accumulates under NM_HOME: recall-run files and retrieval events.

The setting is ``config/retention.toml``: ``keep_days`` per kind (without it a kind is kept
whatever its age) and, for recall runs, ``keep_last`` (how many records stay; default
``DEFAULT_KEEP_RUNS``, enforced as records are written). ``maintenance.prune`` removes what is
past the setting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from narrative_mirror import settings

DEFAULT_KEEP_RUNS = 2000  # recall-run records kept per folder when retention.toml does not say (8-15 KB each)
KINDS = ("recall_runs", "retrieval_events")
KEYS = {"recall_runs": ("keep_days", "keep_last"), "retrieval_events": ("keep_days",)}


@dataclass(frozen=True)
class Retention:
    """Days to keep per kind (None: whatever their age), and how many recall runs to keep."""

    recall_runs_days: int | None = None
    retrieval_events_days: int | None = None
    recall_runs_keep_last: int = DEFAULT_KEEP_RUNS


def load_retention(config: Mapping | None = None) -> Retention:
    """The retention of ``config`` (default: ``retention.toml``), checked: ValueError naming the field."""
    config = settings.load_config("retention") if config is None else config
    unknown = sorted(set(config) - set(KINDS))
    if unknown:
        raise ValueError(f"retention.toml: unknown sections {unknown}; allowed: {list(KINDS)}")
    values: dict[tuple[str, str], int | None] = {}
    for kind in KINDS:
        section = config.get(kind, {})
        extra = sorted(set(section) - set(KEYS[kind]))
        if extra:
            raise ValueError(f"retention.toml [{kind}]: unknown keys {extra}; allowed: {list(KEYS[kind])}")
        for key in KEYS[kind]:
            value = section.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(
                    f"retention.toml [{kind}] {key} must be an integer >= 1 (or absent: the default), got {value!r}"
                )
            values[kind, key] = value
    keep_last = values["recall_runs", "keep_last"]
    return Retention(
        values["recall_runs", "keep_days"],
        values["retrieval_events", "keep_days"],
        DEFAULT_KEEP_RUNS if keep_last is None else keep_last,
    )
