"""Retention by age of what accumulates under NM_HOME: recall-run files and retrieval events.

The setting is ``config/retention.toml`` (``keep_days`` per kind; without it a kind is kept
forever). ``prune`` removes what is older than the setting and says how much it removed; the CLI's
``maintain`` and the Dagster ``maintain_job`` call it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from narrative_mirror import settings
from narrative_mirror.events.table import delete_older
from narrative_mirror.recall_runs import prune_runs

KINDS = ("recall_runs", "retrieval_events")


@dataclass(frozen=True)
class Retention:
    """Days to keep per kind (None: keep everything)."""

    recall_runs_days: int | None = None
    retrieval_events_days: int | None = None


def load_retention(config: Mapping | None = None) -> Retention:
    """The retention of ``config`` (default: ``retention.toml``), checked: ValueError naming the field."""
    config = settings.load_config("retention") if config is None else config
    unknown = sorted(set(config) - set(KINDS))
    if unknown:
        raise ValueError(f"retention.toml: unknown sections {unknown}; allowed: {list(KINDS)}")
    days: dict[str, int | None] = {}
    for kind in KINDS:
        section = config.get(kind, {})
        extra = sorted(set(section) - {"keep_days"})
        if extra:
            raise ValueError(f"retention.toml [{kind}]: unknown keys {extra}; allowed: ['keep_days']")
        value = section.get("keep_days")
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"retention.toml [{kind}] keep_days must be an integer >= 1 (or absent: keep), got {value!r}")
        days[kind] = value
    return Retention(days["recall_runs"], days["retrieval_events"])


def prune(runs_root: Path, events_uri: str, retention: Retention, *, storage_options: Mapping[str, str] | None = None,
          now: datetime | None = None) -> dict:
    """Remove recall-run files and retrieval events older than ``retention``; what was removed
    per kind (``keep_days`` None: nothing, everything is kept)."""
    now = now or datetime.now(UTC)
    runs: dict = {"keep_days": retention.recall_runs_days, "removed_files": 0, "removed_bytes": 0}
    if retention.recall_runs_days is not None:
        runs.update(prune_runs(now - timedelta(days=retention.recall_runs_days), root=runs_root))
    events: dict = {"keep_days": retention.retrieval_events_days, "removed": 0}
    if retention.retrieval_events_days is not None:
        events["removed"] = delete_older(events_uri, now - timedelta(days=retention.retrieval_events_days),
                                         storage_options)
    return {"recall_runs": runs, "retrieval_events": events}
