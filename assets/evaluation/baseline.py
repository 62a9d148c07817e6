"""The baseline a regression check compares an evaluation with: the newest evaluation of the
same partition whose checks all passed, or the one the user pinned (``narrative-mirror baseline
pin``) when that is newer. A materialization whose check failed is never a baseline, so every
run of a regressed config keeps failing until recall recovers or the baseline is moved on purpose."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from narrative_mirror import baselines

# Metadata key of every evaluation: whether all of its checks passed (a baseline candidate).
CHECKS_PASSED = "checks_passed"
# How many of a partition's latest evaluations are searched for one whose checks passed.
SEARCH_LIMIT = 200


@dataclass(frozen=True)
class Baseline:
    metrics: dict[str, float]
    storage_id: int
    run_id: str
    source: str  # "last passing evaluation" or "pinned"

    def describe(self) -> str:
        return f"{self.source} (run {self.run_id[:8]})"


def checks_passed(instance: dg.DagsterInstance, record: dg.EventLogRecord, asset: str) -> bool:
    """Whether every check of ``asset`` evaluated with materialization ``record`` passed: its
    ``checks_passed`` metadata, or for an evaluation made before it was recorded, its run's checks."""
    metadata = record.asset_materialization.metadata
    if CHECKS_PASSED in metadata:
        return bool(metadata[CHECKS_PASSED].value)
    evaluations = instance.all_logs(record.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
    return all(
        e.dagster_event.event_specific_data.passed
        for e in evaluations
        if e.dagster_event.event_specific_data.asset_key == dg.AssetKey(asset)
    )


def _numbers(metadata: dict) -> dict[str, float]:
    return {
        k: float(v.value)
        for k, v in metadata.items()
        if isinstance(v, (dg.FloatMetadataValue, dg.IntMetadataValue)) and v.value is not None
    }


def last_passing(instance: dg.DagsterInstance, asset: str, partition: str) -> Baseline | None:
    """The newest materialization of ``asset``/``partition`` whose checks all passed."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition]), limit=SEARCH_LIMIT
    ).records
    for record in records:
        if checks_passed(instance, record, asset):
            return Baseline(
                _numbers(record.asset_materialization.metadata),
                record.storage_id,
                record.run_id,
                "last passing evaluation",
            )
    return None


def find_baseline(instance: dg.DagsterInstance, asset: str, partition: str, pins_file: Path) -> Baseline | None:
    """What ``asset``/``partition``'s next evaluation is compared with: the newer of the last
    passing evaluation and the pinned one; None when there is neither (the first evaluation)."""
    passing = last_passing(instance, asset, partition)
    pin = baselines.pinned(pins_file, asset, partition)
    if pin and (passing is None or pin["storage_id"] > passing.storage_id):
        return Baseline({k: float(v) for k, v in pin["metrics"].items()}, pin["storage_id"], pin["run_id"], "pinned")
    return passing


def pin_latest(instance: dg.DagsterInstance, asset: str, partition: str, pins_file: Path) -> dict | None:
    """Pin the latest evaluation of ``asset``/``partition`` as its baseline, passed or not;
    None when it was never evaluated."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition]), limit=1
    ).records
    if not records:
        return None
    record = records[0]
    return baselines.pin(
        pins_file, asset, partition, record.storage_id, record.run_id, _numbers(record.asset_materialization.metadata)
    )
