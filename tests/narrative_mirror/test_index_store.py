import polars as pl
import pyarrow as pa
import pytest
from index_frames import DIM, TEXTS, chat_frames

from narrative_mirror.index_rows import build_rows, message_rows
from narrative_mirror.index_store import IndexStore, validate_chat_file


@pytest.mark.parametrize("bad", ["", "a'b", 'a"b', "a\\b", "a\nb"])
def test_chat_file_validation(bad):
    with pytest.raises(ValueError, match="chat_file"):
        validate_chat_file(bad)


def index_chat(store: IndexStore, chat_file: str, texts: list[str]) -> dict[str, int]:
    messages, embeddings, blocks, signals, threads = chat_frames(chat_file, texts)
    rows = build_rows(messages, embeddings, signals=signals, blocks=blocks, threads=threads)
    return {table: store.replace_partition(table, chat_file, r) for table, r in rows.items()}


def test_replace_partition_is_idempotent_and_leaves_other_chats(tmp_path):
    store = IndexStore(str(tmp_path / "db"))
    assert store.versions() == {} and store.chat_files() == []
    index_chat(store, "chat_a", TEXTS)
    index_chat(store, "chat_b", ["one", "two"])
    before_a = store.messages_for("chat_a")
    before_b = store.messages_for("chat_b")
    assert before_a["local_id"].to_list() == ["D1:1", "D1:2", "D1:3", "D1:4"]
    assert store.chat_files() == ["chat_a", "chat_b"]

    v1 = store.versions()
    index_chat(store, "chat_a", TEXTS)  # same rows again
    assert store.versions()["messages"] > v1["messages"]
    assert store.messages_for("chat_a").equals(before_a)
    assert store.messages_for("chat_b").equals(before_b)
    assert store.row_counts() == {"messages": 6, "blocks": 3, "threads": 2}

    # re-index chat_a with fewer messages: its extra rows go, chat_b is untouched
    index_chat(store, "chat_a", ["hello there", "new bike"])
    after = store.messages_for("chat_a")
    assert after["local_id"].to_list() == ["D1:1", "D1:2"]
    assert after["raw_text"].to_list() == ["hello there", "new bike"]
    assert store.blocks_for("chat_a")["block_id"].to_list() == ["chat_a/S1/B0"]
    assert store.messages_for("chat_b").equals(before_b)


def test_failed_replace_keeps_previous_rows(tmp_path):
    store = IndexStore(str(tmp_path / "db"))
    index_chat(store, "chat_a", TEXTS)
    before = store.messages_for("chat_a")
    version = store.versions()["messages"]
    messages, embeddings, *_ = chat_frames("chat_a", TEXTS)
    rows = message_rows(messages, embeddings)

    # wrong vector dimension: refused before writing
    wide = message_rows(
        messages, embeddings.with_columns(pl.col("vector").list.concat(pl.lit([0.0], pl.List(pl.Float32))))
    )
    with pytest.raises(ValueError, match=r"schema differs.*column 'vector'"):
        store.replace_partition("messages", "chat_a", wide)
    # duplicate ids: LanceDB rejects the merge mid-write
    duplicated = pa.concat_tables([rows, rows.slice(0, 1)])
    with pytest.raises(ValueError, match="write failed, previous rows kept"):
        store.replace_partition("messages", "chat_a", duplicated)
    # rows of another chat in this chat's partition
    with pytest.raises(ValueError, match=r"rows of other chat files \['chat_a'\]"):
        store.replace_partition("messages", "chat_b", rows)
    with pytest.raises(ValueError, match="unknown table 'nodes'"):
        store.replace_partition("nodes", "chat_a", rows)

    assert store.versions()["messages"] == version
    assert store.messages_for("chat_a").equals(before)


def test_full_text_search_sees_every_write_without_rebuilding_the_index(tmp_path):
    store = IndexStore(str(tmp_path / "db"))
    index_chat(store, "chat_a", TEXTS)
    indexed = store.health()["messages"]
    assert indexed["unindexed_rows"] == 0  # the index comes with the table
    index_chat(store, "chat_b", ["bikes everywhere", "no"])
    assert store.health()["messages"]["unindexed_rows"] == 2  # a write leaves the index alone: O(rows written)
    assert [mid for mid, _ in store.full_text_search("messages", "chat_a", "bike", 10)] == [
        "chat_a/D1:3",
        "chat_a/D1:2",
    ]
    index_chat(store, "chat_a", ["a unicycle", "hello there"])
    # only message 2's image caption still mentions a bike
    assert [mid for mid, _ in store.full_text_search("messages", "chat_a", "bike", 10)] == ["chat_a/D1:2"]
    assert [mid for mid, _ in store.full_text_search("messages", "chat_a", "unicycle", 10)] == ["chat_a/D1:1"]
    assert [mid for mid, _ in store.full_text_search("messages", "chat_b", "bike", 10)] == [
        "chat_b/D1:1",
        "chat_b/D1:2",
    ]  # text, then image caption


def test_maintenance_compacts_indexes_and_drops_old_versions_keeping_every_row(tmp_path):
    from datetime import timedelta

    store = IndexStore(str(tmp_path / "db"))
    for i in range(6):
        index_chat(store, f"chat_{i}", [f"message {i} about bikes", "hello", "nice", "thanks"])
    index_chat(store, "chat_0", ["a unicycle", "hello", "nice", "thanks"])  # a rewrite leaves dead rows behind
    before = store.health()["messages"]
    assert before["fragments"] >= 6 and before["versions"] >= 7 and before["unindexed_rows"] > 0
    found = {c: store.full_text_search("messages", c, "bikes unicycle", 10) for c in store.chat_files()}
    frames = {c: store.messages_for(c) for c in store.chat_files()}

    report = store.maintain(keep_versions_for=timedelta(0))
    after = store.health()["messages"]
    assert report["after"]["messages"] == after and report["before"]["messages"] == before
    assert after["fragments"] == 1 and after["versions"] < before["versions"] and after["unindexed_rows"] == 0
    assert after["rows"] == before["rows"] == 24
    assert {
        c: [mid for mid, _ in store.full_text_search("messages", c, "bikes unicycle", 10)] for c in store.chat_files()
    } == {c: [mid for mid, _ in hits] for c, hits in found.items()}
    assert all(store.messages_for(c).equals(frame) for c, frame in frames.items())


def test_reads_of_unknown_chats_and_tables_are_empty(tmp_path):
    store = IndexStore(str(tmp_path / "db"))
    assert store.messages_for("nothing").height == 0
    assert store.full_text_search("messages", "nothing", "x", 5) == []
    index_chat(store, "chat_a", TEXTS)
    assert store.messages_for("chat_z").height == 0
    assert store.threads_for("chat_a")["thread_id"].to_list() == ["chat_a/T0"]


def test_empty_partition_creates_and_clears(tmp_path):
    from narrative_mirror.index_rows import thread_schema

    store = IndexStore(str(tmp_path / "db"))
    store.replace_partition("threads", "chat_a", thread_schema(DIM).empty_table())
    assert store.threads_for("chat_a").height == 0
    index_chat(store, "chat_a", TEXTS)
    assert store.threads_for("chat_a").height == 1
    store.replace_partition("threads", "chat_a", thread_schema(DIM).empty_table())  # chat lost its threads
    assert store.threads_for("chat_a").height == 0
