"""Baselines the user pinned for the regression checks: which evaluation a partition's figures
are compared with from now on, when a change that lowered them is accepted on purpose.

One JSON file under NM_HOME (``pins_path``): {asset: {partition: pin}}, each pin naming the
materialization it accepts (its event storage id and run) and its metric values. A pin is
replaced by the next evaluation whose checks pass (the checks take the newer of the two).
"""

from __future__ import annotations

import fcntl
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def pins_path(home: Path) -> Path:
    return Path(home) / "baselines" / "pinned.json"


def read(path: Path) -> dict[str, dict[str, dict[str, Any]]]:
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not a JSON object of pinned baselines ({exc})") from exc


def pinned(path: Path, asset: str, partition: str) -> dict[str, Any] | None:
    """The pin of ``asset``/``partition``, or None."""
    return read(path).get(asset, {}).get(partition)


def pin(
    path: Path, asset: str, partition: str, storage_id: int, run_id: str, metrics: dict[str, float], by: str = "cli"
) -> dict[str, Any]:
    """Pin the materialization ``storage_id`` (of run ``run_id``) as the baseline of
    ``asset``/``partition``; returns the pin. Written under a lock, whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "storage_id": int(storage_id),
        "run_id": run_id,
        "metrics": metrics,
        "pinned_by": by,
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    with (path.parent / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        pins = read(path)
        pins.setdefault(asset, {})[partition] = record
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(pins, indent=1, sort_keys=True), encoding="utf-8")
        tmp.replace(path)
    return record
