"""Parquet files per asset and partition under NM_HOME, written atomically, and checked: a file
that is missing, empty or not a whole parquet file is found (cheaply by its footer, or fully by
reading it) and set aside so that it never blocks a run again."""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import tempfile
from pathlib import Path

import polars as pl


def write_atomically(path: Path, data: bytes) -> None:
    """Replace (or create) ``path`` with ``data``: a temp file in the same folder, fsynced, renamed
    over it, then the folder fsynced; an existing file's mode is kept."""
    mode = path.stat().st_mode & 0o777 if path.exists() else None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


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


PARQUET_MAGIC = b"PAR1"
# A parquet file starts with the magic, ends with footer length (4 bytes) and the magic again.
_SMALLEST_PARQUET = 2 * len(PARQUET_MAGIC) + 4


def frame_problem(path: Path, full: bool = False) -> str | None:
    """What is wrong with the stored frame at ``path`` (None: nothing). Cheap by default: it
    exists, is not empty and has the parquet magic at both ends (no read of the data); ``full``
    also reads the whole file."""
    try:
        size = path.stat().st_size
        if size == 0:
            return "empty file"
        if size < _SMALLEST_PARQUET:
            return f"truncated ({size} bytes)"
        with path.open("rb") as f:
            head = f.read(len(PARQUET_MAGIC))
            f.seek(-len(PARQUET_MAGIC), os.SEEK_END)
            tail = f.read(len(PARQUET_MAGIC))
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    if head != PARQUET_MAGIC or tail != PARQUET_MAGIC:
        return "not a whole parquet file (no PAR1 at " + ("its start)" if head != PARQUET_MAGIC else "its end)")
    if full:
        try:
            pl.read_parquet(path)
        except Exception as exc:  # polars raises several types for a damaged file
            return f"unreadable ({' '.join(str(exc).split())[:200]})"
    return None


def set_aside(path: Path) -> Path:
    """Move a damaged stored frame out of the way (``<name>.corrupt``, replacing an older one):
    the next run writes a new one instead of reading it."""
    aside = path.with_name(path.name + ".corrupt")
    os.replace(path, aside)
    return aside


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
