"""Rows of figures as Dagster table metadata (``MetadataValue.table``): what the UI shows as a
table rather than behind "Show Markdown", numbers rounded to 3 decimals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg


def _kind(values: list[Any]) -> str:
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return "bool"
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return "int"
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return "float"
    return "string"


def _cell(value: Any, kind: str) -> Any:
    if value is None:
        return None
    if kind == "float":
        return round(float(value), 3)
    if kind == "string":
        return value if isinstance(value, str) else str(value)
    return value


def table_metadata(rows: Sequence[Mapping[str, Any]]) -> dg.TableMetadataValue:
    """``rows`` (dicts; columns in order of first appearance) as a table with a typed schema."""
    columns: list[str] = []
    for row in rows:
        columns += [c for c in row if c not in columns]
    kinds = {c: _kind([row.get(c) for row in rows]) for c in columns}
    schema = dg.TableSchema(columns=[dg.TableColumn(name=c, type=kinds[c]) for c in columns])
    records = [dg.TableRecord({c: _cell(row.get(c), kinds[c]) for c in columns}) for row in rows]
    return dg.MetadataValue.table(records=records, schema=schema)
