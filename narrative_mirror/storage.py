"""Parquet files per asset and partition under NM_HOME, written atomically."""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import tempfile
from pathlib import Path

import polars as pl


def frame_path(base: Path, asset: str, partition: str | None) -> Path:
    return base / asset / f"{partition or '__all__'}.parquet"


def write_frame(path: Path, df: pl.DataFrame) -> None:
    """Write to a temp file in the same folder, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    os.close(fd)
    try:
        df.write_parquet(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_frame(path: Path) -> pl.DataFrame:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no stored output (materialize the upstream asset first)")
    return pl.read_parquet(path)


def frame_hash(df: pl.DataFrame) -> str:
    """Content hash of a frame (column names, types and values), used as a Dagster data version."""
    buf = io.BytesIO()
    df.write_ipc(buf, compression="uncompressed")
    return hashlib.sha256(buf.getvalue()).hexdigest()[:32]


def append_jsonl(path: Path, record: dict) -> None:
    """Append one JSON line under an exclusive lock (concurrent writers never interleave)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps(record, sort_keys=True, default=str) + "\n")
