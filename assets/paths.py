"""Paths in materialization metadata: relative to the folder that holds them (the data folder, the
ARC folder, NM_HOME), never absolute: Dagster keeps metadata after a folder moves, and an
absolute path names the user's machine and folders."""

from __future__ import annotations

from pathlib import Path

import dagster as dg


def shown_path(path: str | Path, *folders: str | Path | None) -> dg.MetadataValue:
    """``path`` relative to the first of ``folders`` that holds it; its file name when none does."""
    path = Path(path).resolve()
    for folder in folders:
        if folder is None:
            continue
        try:
            return dg.MetadataValue.path(str(path.relative_to(Path(folder).resolve())))
        except ValueError:
            continue
    return dg.MetadataValue.path(path.name)
