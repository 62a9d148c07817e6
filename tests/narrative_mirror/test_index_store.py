from datetime import datetime

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from narrative_mirror import schema
from narrative_mirror.index_rows import block_rows, build_rows, message_rows, thread_rows
from narrative_mirror.index_store import IndexStore, validate_chat_file

DIM = 4


def chat_frames(chat_file: str, texts: list[str]):
    """Hand-made layers: messages alternate speakers A/B, blocks of 2 messages, one thread of all."""
    n = len(texts)
    local_ids = [f"D1:{i + 1}" for i in range(n)]
    messages = pl.DataFrame({
        "message_id": [f"{chat_file}/{lid}" for lid in local_ids],
        "chat_file": [chat_file] * n,
        "local_id": local_ids,
        "position": list(range(n)),
        "session": [1] * n,
        "speaker": ["A" if i % 2 == 0 else "B" for i in range(n)],
        "text": texts,
        "timestamp": [datetime(2024, 1, 1, 10, i) for i in range(n)],
        "image_urls": [[] for _ in range(n)],
        "image_caption": ["a red bike" if i == 1 else "" for i in range(n)],
    }, schema=schema.MESSAGES)
    # message i's vector: unit vector on axis i % DIM
    vectors = np.eye(DIM, dtype=np.float32)[[i % DIM for i in range(n)]]
    embeddings = pl.DataFrame({
        "message_id": messages["message_id"], "chat_file": messages["chat_file"],
        "local_id": messages["local_id"], "vector": list(vectors),
    }, schema=schema.MESSAGE_EMBEDDINGS)
    blocks = pl.DataFrame({
        "block_id": [f"{chat_file}/S1/B{b}" for b in range(n // 2)],
        "chat_file": [chat_file] * (n // 2),
        "session": [1] * (n // 2),
        "block_index": list(range(n // 2)),
        "first_position": [2 * b for b in range(n // 2)],
        "last_position": [2 * b + 1 for b in range(n // 2)],
        "message_ids": [local_ids[2 * b: 2 * b + 2] for b in range(n // 2)],
        "start_time": [datetime(2024, 1, 1, 10, 2 * b) for b in range(n // 2)],
        "end_time": [datetime(2024, 1, 1, 10, 2 * b + 1) for b in range(n // 2)],
        "speakers": [["A", "B"]] * (n // 2),
        "keywords": [["kw"]] * (n // 2),
        "label": [f"label {b}" for b in range(n // 2)],
        "summary": [f"summary {b}" for b in range(n // 2)],
    }, schema=schema.BLOCKS)
    signals = pl.DataFrame({
        "message_id": messages["message_id"], "chat_file": messages["chat_file"],
        "local_id": messages["local_id"],
        "block_id": [f"{chat_file}/S1/B{i // 2}" for i in range(n)],
        "entities": [["bike"] if i == 1 else [] for i in range(n)],
        "temporal": [[] for _ in range(n)], "is_plan": [False] * n, "is_question": [False] * n,
        "sentiment": [0.0] * n, "emotion": [""] * n, "has_image": [i == 1 for i in range(n)],
        "ref_block_ids": [[] for _ in range(n)],
        "refs": [0.5 if i == 2 else 0.0 for i in range(n)],
        "importance_tier": [3 if i == 0 else 1 for i in range(n)],
    }, schema=schema.MESSAGE_SIGNALS)
    threads = pl.DataFrame({
        "thread_id": [f"{chat_file}/T0"], "chat_file": [chat_file],
        "block_ids": [[f"{chat_file}/S1/B{b}" for b in range(n // 2)]],
        "start_time": [datetime(2024, 1, 1, 10, 0)], "end_time": [datetime(2024, 1, 1, 10, 3)],
        "participants": [["A", "B"]], "entities": [["bike"]], "title": ["Bikes"], "summary": ["About bikes"],
    }, schema=schema.THREADS)
    return messages, embeddings, blocks, signals, threads


TEXTS = ["hello there", "look at my bike", "nice bike", "thanks"]


def test_message_rows_text_signals_and_vectors():
    messages, embeddings, blocks, signals, threads = chat_frames("chat_a", TEXTS)
    rows = message_rows(messages, embeddings, signals)
    assert rows.num_rows == 4
    assert rows.column("text").to_pylist() == [
        "A: hello there", "B: look at my bike [image: a red bike]", "A: nice bike", "B: thanks"]
    assert rows.column("raw_text").to_pylist() == TEXTS
    assert rows.column("block_id").to_pylist() == ["chat_a/S1/B0", "chat_a/S1/B0", "chat_a/S1/B1", "chat_a/S1/B1"]
    assert rows.column("refs").to_pylist() == [0.0, 0.0, 0.5, 0.0]
    assert rows.column("importance_tier").to_pylist() == [3, 1, 1, 1]
    assert rows.column("entities").to_pylist() == [[], ["bike"], [], []]
    assert rows.schema.field("vector").type == pa.list_(pa.float32(), DIM)
    assert rows.column("vector").to_pylist()[1] == [0.0, 1.0, 0.0, 0.0]
    # without signals: defaults, no block
    bare = message_rows(messages, embeddings)
    assert bare.column("block_id").to_pylist() == [None] * 4
    assert bare.column("refs").to_pylist() == [0.0] * 4


def test_block_and_thread_vectors_are_normalized_member_means():
    messages, embeddings, blocks, signals, threads = chat_frames("chat_a", TEXTS)
    brows = block_rows(blocks, embeddings)
    h = 1 / np.sqrt(2)
    assert np.allclose(brows.column("vector").to_pylist(), [[h, h, 0, 0], [0, 0, h, h]])
    assert brows.column("message_ids").to_pylist() == [["D1:1", "D1:2"], ["D1:3", "D1:4"]]
    assert brows.column("text").to_pylist() == ["label 0 summary 0 kw", "label 1 summary 1 kw"]
    trows = thread_rows(threads, blocks, embeddings)
    assert np.allclose(trows.column("vector").to_pylist(), [[0.5, 0.5, 0.5, 0.5]])
    assert trows.column("text").to_pylist() == ["Bikes. About bikes"]


def test_build_rows_errors_name_the_problem():
    messages, embeddings, blocks, signals, threads = chat_frames("chat_a", TEXTS)
    with pytest.raises(ValueError, match=r"no vector for 1 messages, e.g. \['chat_a/D1:4'\]"):
        message_rows(messages, embeddings.head(3))
    with pytest.raises(ValueError, match="messages: missing columns \\['speaker'\\]"):
        message_rows(messages.drop("speaker"), embeddings)
    with pytest.raises(ValueError, match="threads given without their blocks"):
        build_rows(messages, embeddings, threads=threads)
    bad_thread = threads.with_columns(pl.lit(["chat_a/S1/B9"]).alias("block_ids"))
    with pytest.raises(ValueError, match=r"thread chat_a/T0: unknown block ids \['chat_a/S1/B9'\]"):
        thread_rows(bad_thread, blocks, embeddings)


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
    wide = message_rows(messages, embeddings.with_columns(
        pl.col("vector").list.concat(pl.lit([0.0], pl.List(pl.Float32)))))
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
        "chat_a/D1:3", "chat_a/D1:2"]
    index_chat(store, "chat_a", ["a unicycle", "hello there"])
    # only message 2's image caption still mentions a bike
    assert [mid for mid, _ in store.full_text_search("messages", "chat_a", "bike", 10)] == ["chat_a/D1:2"]
    assert [mid for mid, _ in store.full_text_search("messages", "chat_a", "unicycle", 10)] == ["chat_a/D1:1"]
    assert [mid for mid, _ in store.full_text_search("messages", "chat_b", "bike", 10)] == [
        "chat_b/D1:1", "chat_b/D1:2"]  # text, then image caption


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
    assert {c: [mid for mid, _ in store.full_text_search("messages", c, "bikes unicycle", 10)]
            for c in store.chat_files()} == {c: [mid for mid, _ in hits] for c, hits in found.items()}
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
