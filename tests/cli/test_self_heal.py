"""Stored state that checks itself: a lost or damaged index or parquet file is found by the next
command and rebuilt, saying why (real Dagster instance, LanceDB and embedder in a tmp NM_HOME)."""

import json
import os
from pathlib import Path

import pytest
from chat_factory import small_chat, write_chat

from cli.main import main
from narrative_mirror.index_store import IndexStore
from narrative_mirror.storage import frame_problem

CHAT = "tiny"
QUESTION = "Where does Ana work?"
LAYERS_AFTER_EMBEDDINGS = ["l15_signals", "l1_topics", "l2_threads", "lancedb_index", "message_embeddings"]


def home() -> Path:
    return Path(os.environ["NM_HOME"])


def run(capsys, argv: list[str]) -> tuple[int, dict, str]:
    rc = main([*argv, "--json"])
    captured = capsys.readouterr()
    return rc, json.loads(captured.out), captured.err


@pytest.fixture
def data(tmp_path, capsys) -> Path:
    """One small chat, built."""
    folder = tmp_path / "data"
    write_chat(folder, CHAT, small_chat())
    rc, out, _ = run(capsys, ["build", "--data", str(folder)])
    assert rc == 0 and out["repairs"] == [] and out["messages"] == 8
    return folder


def ask(capsys, data: Path) -> tuple[int, dict, str]:
    return run(capsys, ["ask", "--data", str(data), "--chat", CHAT, "--profile", "fast", QUESTION])


def assert_answers(capsys, data: Path) -> None:
    rc, out, _ = ask(capsys, data)
    assert rc == 0
    assert [e["id"] for e in out["evidence"]] == ["D1:1"]  # "I start my new job at the bakery tomorrow"


def test_a_deleted_index_is_rebuilt_by_the_next_build_and_ask_answers(data, capsys):
    shutil_rmtree(home() / "lancedb")
    rc, out, err = run(capsys, ["build", "--data", str(data)])
    assert rc == 0
    assert out["repairs"] == [
        {
            "chat": CHAT,
            "asset": "lancedb_index",
            "table": None,
            "reason": "lancedb rows missing (0 of 8 in messages)",
            "action": "rebuilt",
        }
    ]
    assert "tiny: lancedb rows missing (0 of 8 in messages): rebuilding the index" in err
    assert "up to date" not in err
    assert out["per_file"][CHAT]["ran"] == ["lancedb_index"]
    assert IndexStore(str(home() / "lancedb")).chat_rows(CHAT) == {"messages": 8, "blocks": 2, "threads": 0}
    assert_answers(capsys, data)
    rc, out, err = run(capsys, ["build", "--data", str(data)])
    assert rc == 0 and out["repairs"] == [] and "tiny: memory up to date" in err


def test_ask_rebuilds_a_deleted_index_itself(data, capsys):
    shutil_rmtree(home() / "lancedb")  # the freshness stamp still matches: ask must not trust it alone
    rc, out, err = ask(capsys, data)
    assert rc == 0, err
    assert "tiny: lancedb rows missing (0 of 8 in messages): rebuilding the index" in err
    assert [e["id"] for e in out["evidence"]] == ["D1:1"]


def test_a_truncated_lance_file_is_repaired_by_the_next_command(data, capsys):
    lance_files = sorted((home() / "lancedb" / "messages.lance" / "data").glob("*.lance"))
    assert lance_files
    with lance_files[0].open("r+b") as f:
        f.truncate(10)
    rc, out, err = ask(capsys, data)
    assert rc == 0, err
    line = next(line for line in err.splitlines() if line.startswith("lancedb table messages unreadable ("))
    assert line.endswith(": rebuilding the index")
    assert [e["id"] for e in out["evidence"]] == ["D1:1"]
    assert IndexStore(str(home() / "lancedb")).chat_rows(CHAT) == {"messages": 8, "blocks": 2, "threads": 0}


def test_a_truncated_embeddings_parquet_is_set_aside_and_rebuilt(data, capsys):
    path = home() / "storage" / "message_embeddings" / f"{CHAT}.parquet"
    size = path.stat().st_size
    with path.open("r+b") as f:
        f.truncate(size // 2)
    rc, out, err = run(capsys, ["build", "--data", str(data)])
    assert rc == 0
    assert out["repairs"] == [
        {
            "chat": CHAT,
            "asset": "message_embeddings",
            "table": None,
            "reason": "message_embeddings output not a whole parquet file (no PAR1 at its end)",
            "action": "set aside as tiny.parquet.corrupt; rebuilt",
        }
    ]
    assert (
        "tiny: message_embeddings output not a whole parquet file (no PAR1 at its end): "
        "rebuilding message_embeddings and what follows it" in err
    )
    assert "up to date" not in err
    assert sorted(out["per_file"][CHAT]["ran"]) == LAYERS_AFTER_EMBEDDINGS
    assert out["encoded_messages"] == 8
    assert path.with_name(f"{CHAT}.parquet.corrupt").stat().st_size == size // 2
    # The edit that used to fail on every run ("The file must end with PAR1") now builds.
    chat = json.loads((data / f"{CHAT}.json").read_text())
    chat["session_2"][3]["clean_text"] = "Save me two"
    (data / f"{CHAT}.json").write_text(json.dumps(chat))
    rc, out, err = run(capsys, ["build", "--data", str(data)])
    assert rc == 0 and out["failures"] == [] and out["encoded_messages"] == 1
    assert_answers(capsys, data)


def test_build_repair_reads_everything_and_reports_what_it_repaired(data, capsys):
    # Damage the cheap check cannot see: a parquet file whole at both ends, garbage inside,
    # and a table without its full-text index.
    path = home() / "storage" / "l1_topics" / f"{CHAT}.parquet"
    raw = bytearray(path.read_bytes())
    raw[4 : len(raw) // 2] = b"\xff" * (len(raw) // 2 - 4)
    path.write_bytes(bytes(raw))
    store = IndexStore(str(home() / "lancedb"))
    table = store._db.open_table("messages")
    table.drop_index(next(i.name for i in table.list_indices() if i.columns == ["text"]))
    assert frame_problem(path) is None and frame_problem(path, full=True).startswith("unreadable (")

    rc, out, err = run(capsys, ["build", "--data", str(data), "--repair"])
    assert rc == 0
    parquet, fts = out["repairs"]
    assert parquet["chat"] == CHAT and parquet["asset"] == "l1_topics"
    assert parquet["reason"].startswith("l1_topics output unreadable (")
    assert parquet["action"] == "set aside as tiny.parquet.corrupt; rebuilt"
    assert fts == {
        "chat": None,
        "asset": "lancedb_index",
        "table": "messages",
        "reason": "lancedb table messages full-text index missing",
        "action": "full-text index created",
    }
    assert "lancedb table messages full-text index missing: creating it" in err
    assert sorted(out["per_file"][CHAT]["ran"]) == ["l15_signals", "l1_topics", "l2_threads", "lancedb_index"]
    assert store.missing_text_indexes() == []
    rc, out, _ = run(capsys, ["build", "--data", str(data), "--repair"])
    assert rc == 0 and out["repairs"] == []


def shutil_rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path)
