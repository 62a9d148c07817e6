"""Append-only experiment log: one JSON line per evaluation, kept across runs in NM_HOME.

Each record: experiment_id, time (UTC), kind (summary | test_eval), the config fingerprint,
what changed since the previous record, and the metrics (train, and test when present).
"""

from __future__ import annotations

import csv
import fcntl
import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from narrative_mirror.evaluation import HEADLINE_KEYS, changed_parts, changed_settings, settings_snapshot


def read(path: Path) -> list[dict[str, Any]]:
    """The records of the experiment log ``path`` (a home's is ``Home.experiments``)."""
    if not path.is_file():
        return []
    records = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{n}: not a JSON record ({exc})") from exc
    return records


def append(
    kind: str, fingerprint: dict[str, str], metrics: dict[str, Any], path: Path | None = None, **extra: Any
) -> dict[str, Any]:
    """Append one record (under an exclusive lock, so concurrent runs never interleave lines).
    Its ``changed`` names what differs from the previous record of the same kind (and the same
    ``partition``/``asset`` when given): each fingerprint part, or ``data or index`` when the
    config is the same and the figures moved."""
    return _append(kind, fingerprint, metrics, path, extra, only_if_changed=False)


def append_if_changed(
    kind: str, fingerprint: dict[str, str], metrics: dict[str, Any], path: Path | None = None, **extra: Any
) -> dict[str, Any]:
    """As ``append``, but a re-run that changed nothing (same config, same figures, same extra
    fields) appends nothing and returns the previous record: one row per change, not per run."""
    return _append(kind, fingerprint, metrics, path, extra, only_if_changed=True)


def _same_series(record: dict[str, Any], kind: str, extra: dict[str, Any]) -> bool:
    return record.get("kind") == kind and all(record.get(k) == extra[k] for k in ("partition", "asset") if k in extra)


def _normalized(value: Any) -> Any:
    """``value`` as it reads back from the log (JSON), so a fresh record compares with a stored one."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _append(
    kind: str,
    fingerprint: dict[str, str],
    metrics: dict[str, Any],
    path: Path | None,
    extra: dict[str, Any],
    only_if_changed: bool,
) -> dict[str, Any]:
    if path is None:
        raise ValueError("no experiment log: pass path (e.g. Home(...).experiments)")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        previous = None
        for line in f.read().splitlines():
            if line.strip() and _same_series(record := json.loads(line), kind, extra):
                previous = record
        same_figures = (
            previous is not None
            and _normalized(metrics) == previous.get("metrics")
            and all(_normalized(v) == previous.get(k) for k, v in extra.items())
        )
        changed = changed_parts(previous["config"] if previous else None, fingerprint)
        if not changed and only_if_changed and same_figures:
            return previous
        snapshot = settings_snapshot()
        changed = _name_settings(changed, previous.get("settings") if previous else None, snapshot)
        record = {
            "experiment_id": uuid.uuid4().hex[:12],
            "time": datetime.now(UTC).isoformat(timespec="seconds"),
            "kind": kind,
            "fingerprint": fingerprint.get("fingerprint"),
            "config": fingerprint,
            "changed": changed or ([] if same_figures else ["data or index (same config)"]),
            "metrics": metrics,
            "settings": snapshot,
            **extra,
        }
        f.seek(0, 2)
        f.write(json.dumps(record, sort_keys=True, default=str) + "\n")
        f.flush()
    return record


def _name_settings(changed: list[str], previous: dict[str, Any] | None, current: dict[str, Any]) -> list[str]:
    """Each changed config file replaced by the settings that changed in it, with their old and
    new values (a record written before settings were logged, or a comment-only edit, keeps the
    file's name)."""
    if previous is None:
        return changed
    out = []
    for part in changed:
        named = changed_settings(previous, current, part) if part.endswith(".toml") else []
        out += named or [part]
    return out


SPLITS = ("train", "test")


def flat_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One flat row per record (metrics as ``<split>/<metric>`` columns) for tables and CSV. A
    summary row has both splits' headline columns (the design card's train_recall / test_recall side by
    side), empty for a split not evaluated under that config."""
    rows = []
    for r in records:
        row = {k: r.get(k) for k in ("experiment_id", "time", "kind", "fingerprint")}
        row["changed"] = ", ".join(r.get("changed", []))
        row["partition"] = r.get("partition", "")
        if r.get("kind") == "summary":
            row.update({f"{split}/{name}": None for split in SPLITS for name in HEADLINE_KEYS})
        for split, values in (r.get("metrics") or {}).items():
            if isinstance(values, dict):
                for name, value in values.items():
                    if isinstance(value, (int, float)) or value is None:
                        row[f"{split}/{name}"] = value
        rows.append(row)
    return rows


def export_csv(out: Path, path: Path) -> Path:
    rows = flat_rows(read(path))
    cols: list[str] = []
    for row in rows:
        cols += [c for c in row if c not in cols]
    with out.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=cols)
        writer.writeheader()
        writer.writerows(rows)
    return out
