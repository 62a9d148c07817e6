from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from numbers import Real
from typing import Any

from narrative_mirror.metrics.arc import ARC_METRIC_KEYS
from narrative_mirror.metrics.per_question import QA_METRIC_KEYS


def summarize(
    rows: Iterable[Mapping[str, Any]], by: str | None = "category", metrics: Sequence[str] | None = None
) -> dict[str, Any]:
    """Mean of each metric over all rows and per value of the ``by`` field.

    Returns ``{"overall": stats, "groups": {value: stats}}`` (``groups`` is empty when ``by`` is
    None), where ``stats`` = ``{"count": rows, "excluded": rows without any metric value,
    metric: mean}``. None values (questions with no resolvable gold) are left out of a mean; a
    metric with no value at all has mean None. ``metrics`` defaults to the known QA and ARC
    metric keys present in the rows.
    """
    row_list = list(rows)
    if metrics is None:
        present = {key for row in row_list for key in row}
        metrics = [key for key in (*QA_METRIC_KEYS, *ARC_METRIC_KEYS) if key in present]
    for index, row in enumerate(row_list):
        _check_row(row, index, metrics, by)
    groups: dict[Hashable, list[Mapping[str, Any]]] = {}
    if by is not None:
        for row in row_list:
            groups.setdefault(row[by], []).append(row)
    # Group values of one kind sort naturally (categories 1, 2, 3); the type name keeps mixed kinds comparable.
    ordered = sorted(groups, key=lambda value: (type(value).__name__, value))
    return {
        "overall": _stats(row_list, metrics),
        "groups": {value: _stats(groups[value], metrics) for value in ordered},
    }


def _check_row(row: Mapping[str, Any], index: int, metrics: Sequence[str], by: str | None) -> None:
    if by is not None and by not in row:
        raise ValueError(f"summarize: row {index} has no {by!r} field to group by")
    for metric in metrics:
        if metric not in row:
            raise ValueError(f"summarize: row {index} has no {metric!r} field")
        value = row[metric]
        if value is not None and (isinstance(value, bool) or not isinstance(value, Real) or math.isnan(value)):
            raise ValueError(f"summarize: row {index} field {metric!r} is {value!r}, expected a number or None")


def _stats(rows: list[Mapping[str, Any]], metrics: Sequence[str]) -> dict[str, Any]:
    stats: dict[str, Any] = {
        "count": len(rows),
        "excluded": sum(1 for row in rows if all(row[metric] is None for metric in metrics)),
    }
    for metric in metrics:
        values = [row[metric] for row in rows if row[metric] is not None]
        stats[metric] = math.fsum(values) / len(values) if values else None
    return stats
