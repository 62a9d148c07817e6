"""The store's checks: a damaged parquet file or Lance table is seen (cheaply or by a full read),
counted rows per chat are exact, a dropped table comes back on the next write, and a store whose
folder was removed and made again is used again by the same IndexStore."""

import shutil

import polars as pl
from index_frames import TEXTS, chat_frames

from narrative_mirror.index_rows import build_rows
from narrative_mirror.index_store import IndexStore
from narrative_mirror.storage import frame_problem, set_aside, write_frame


def index_chat(store: IndexStore, chat_file: str, texts: list[str]) -> None:
    messages, embeddings, blocks, signals, threads = chat_frames(chat_file, texts)
    for table, rows in build_rows(messages, embeddings, signals=signals, blocks=blocks, threads=threads).items():
        store.replace_partition(table, chat_file, rows)


def test_frame_problem_cheap_and_full(tmp_path):
    path = tmp_path / "f.parquet"
    assert frame_problem(path) == "missing"
    write_frame(path, pl.DataFrame({"a": list(range(1000)), "b": ["x" * 20] * 1000}))
    assert frame_problem(path) is None and frame_problem(path, full=True) is None
    raw = path.read_bytes()
    half = len(raw) // 2
    path.write_bytes(raw[:4] + b"\xff" * (half - 4) + raw[half:])
    assert frame_problem(path) is None  # whole at both ends: only a full read sees it
    assert frame_problem(path, full=True).startswith("unreadable (")
    path.write_bytes(raw[: len(raw) // 2])
    assert frame_problem(path) == "not a whole parquet file (no PAR1 at its end)"
    path.write_bytes(b"")
    assert frame_problem(path) == "empty file"
    assert set_aside(path) == tmp_path / "f.parquet.corrupt" and not path.exists()


def test_counts_per_chat_and_a_damaged_table(tmp_path):
    store = IndexStore(str(tmp_path / "db"))
    index_chat(store, "chat_a", TEXTS)
    index_chat(store, "chat_b", ["one", "two"])
    assert store.rows_per_chat("messages") == {"chat_a": 4, "chat_b": 2}
    assert store.chat_rows("chat_b") == {"messages": 2, "blocks": 1, "threads": 1}
    assert store.chat_rows("nobody") == {"messages": 0, "blocks": 0, "threads": 0}
    assert [store.table_problem(t) for t in ("messages", "blocks", "threads")] == [None, None, None]
    assert store.missing_text_indexes() == []

    for path in (tmp_path / "db" / "messages.lance" / "data").glob("*.lance"):
        with path.open("r+b") as f:
            f.truncate(10)
    fresh = IndexStore(str(tmp_path / "db"))  # a new process: nothing cached
    assert fresh.table_problem("messages").startswith("unreadable (")
    fresh.drop("messages")
    assert fresh.rows_per_chat("messages") == {} and fresh.versions().keys() == {"blocks", "threads"}
    index_chat(fresh, "chat_a", TEXTS)
    assert fresh.rows_per_chat("messages") == {"chat_a": 4}
    assert fresh.missing_text_indexes() == []


def test_a_store_removed_and_made_again_is_used_again(tmp_path):
    store = IndexStore(str(tmp_path / "db"))
    index_chat(store, "chat_a", TEXTS)
    assert store.chat_files() == ["chat_a"]
    shutil.rmtree(tmp_path / "db")
    assert store.chat_files() == [] and store.versions() == {}
    index_chat(IndexStore(str(tmp_path / "db")), "chat_b", ["one", "two"])  # another process rebuilds it
    assert store.chat_files() == ["chat_b"]
