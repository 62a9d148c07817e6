"""What ``narrative-mirror maintain`` and the Dagster ``maintain_job`` do: remove the recall-run
files and retrieval events past the retention of ``config/retention.toml`` (narrative_mirror/retention.py),
and say how much was removed."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

from narrative_mirror.events.table import delete_older
from narrative_mirror.recall_runs import prune_runs
from narrative_mirror.retention import Retention


def prune(
    runs_root: Path,
    events_uri: str,
    retention: Retention,
    *,
    storage_options: Mapping[str, str] | None = None,
    now: datetime | None = None,
) -> dict:
    """Remove recall-run files and retrieval events older than ``retention`` (and the recall runs
    past its ``keep_last``); what was removed per kind (``keep_days`` None: none for its age)."""
    now = now or datetime.now(UTC)
    runs: dict = {"keep_days": retention.recall_runs_days, "keep_last": retention.recall_runs_keep_last}
    before = now - timedelta(days=retention.recall_runs_days) if retention.recall_runs_days is not None else None
    runs.update(prune_runs(before, root=runs_root, keep_last=retention.recall_runs_keep_last))
    events: dict = {"keep_days": retention.retrieval_events_days, "removed": 0}
    if retention.retrieval_events_days is not None:
        events["removed"] = delete_older(
            events_uri, now - timedelta(days=retention.retrieval_events_days), storage_options
        )
    return {"recall_runs": runs, "retrieval_events": events}
