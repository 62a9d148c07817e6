from datetime import datetime

import polars as pl
import pytest

from narrative_mirror import storage


def _frame():
    return pl.DataFrame({"id": ["a", "b"], "ids": [["x"], ["y", "z"]], "t": [datetime(2024, 1, 1)] * 2})


def test_write_then_read_round_trips(tmp_path):
    path = storage.frame_path(tmp_path, "messages", "Chat_1")
    storage.write_frame(path, _frame())
    assert storage.read_frame(path).equals(_frame())
    assert list(path.parent.iterdir()) == [path]  # no temp file left behind


def test_failed_write_keeps_the_previous_file(tmp_path):
    path = storage.frame_path(tmp_path, "messages", "Chat_1")
    storage.write_frame(path, _frame())
    bad = pl.DataFrame({"o": [object()]}, schema={"o": pl.Object})
    with pytest.raises(Exception):  # noqa: B017 - whatever polars raises for an Object column
        storage.write_frame(path, bad)
    assert storage.read_frame(path).equals(_frame())
    assert list(path.parent.iterdir()) == [path]


def test_frame_hash_is_content_based():
    assert storage.frame_hash(_frame()) == storage.frame_hash(pl.DataFrame(_frame().to_dicts()))
    assert storage.frame_hash(_frame()) != storage.frame_hash(_frame().reverse())


def test_missing_output_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="materialize the upstream"):
        storage.read_frame(tmp_path / "nope.parquet")


def test_write_atomically_keeps_an_existing_files_mode_and_creates_new_ones_private(tmp_path):
    shared = tmp_path / "shared.json"
    shared.write_text("old")
    shared.chmod(0o644)
    storage.write_atomically(shared, b"new")
    fresh = tmp_path / "fresh.json"
    storage.write_atomically(fresh, b"first")
    assert (shared.read_bytes(), shared.stat().st_mode & 0o777) == (b"new", 0o644)
    assert (fresh.read_bytes(), fresh.stat().st_mode & 0o777) == (b"first", 0o600)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.json", "shared.json"]  # no temp file left
