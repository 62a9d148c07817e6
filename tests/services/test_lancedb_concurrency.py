"""Parallel partitions writing one LanceDB table, on a local folder and on the S3-compatible server:
several processes write their chats into tables that do not exist yet (all of them create them),
then replace their chats again and again while another compacts the table. Commit conflicts are
redone, a create that landed over another writer's table puts back what it dropped: nothing is
lost or duplicated."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from narrative_mirror import index_store
from narrative_mirror.index_store import IndexStore, retry_commit_conflicts

WRITER = Path(__file__).with_name("lancedb_writer.py")
WRITERS = 4
ROUNDS = 4
RACES = 3  # stores whose tables the writers all create at once
CONFLICT = RuntimeError(
    "lance error: Retryable commit conflict for version 5: This Rewrite transaction was "
    "preempted by concurrent transaction Update at version 5. Please retry."
)


@pytest.fixture
def no_wait(monkeypatch):
    monkeypatch.setattr(index_store, "COMMIT_RETRY_WAIT_S", 0.0)


def test_a_commit_conflict_is_redone_until_it_lands(no_wait):
    attempts = []

    def write():
        attempts.append(1)
        if len(attempts) < 3:
            raise CONFLICT
        return 7

    assert retry_commit_conflicts(write) == 7 and len(attempts) == 3


def test_other_errors_are_not_retried_and_retries_are_bounded(no_wait):
    calls = []

    def bad_schema():
        calls.append(1)
        raise ValueError("messages rows for x: schema differs from the table's")

    with pytest.raises(ValueError, match="schema differs"):
        retry_commit_conflicts(bad_schema)
    assert len(calls) == 1

    def always_conflicting():
        calls.append(1)
        raise CONFLICT

    with pytest.raises(RuntimeError, match="Retryable commit conflict"):
        retry_commit_conflicts(always_conflicting, attempts=3)
    assert len(calls) == 1 + 3


def _spawn(args: list[str], env: dict[str, str] | None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(WRITER), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _report(proc: subprocess.Popen) -> dict:
    try:
        out, err = proc.communicate(timeout=480)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def race_first_writes(uris: list[str], work: Path, env: dict[str, str] | None) -> list[dict]:
    """WRITERS processes writing their chat into each store in turn, all at once, while its
    tables do not exist yet: every one of them finds them missing and creates them."""
    work.mkdir(parents=True, exist_ok=True)
    chats = [f"chat_{i}" for i in range(WRITERS)]
    procs = [_spawn(["race", chat, str(work), *uris], env) for chat in chats]
    try:
        for k in range(len(uris)):
            deadline = time.monotonic() + 240
            while not all((work / f"ready_{k}_{chat}").exists() for chat in chats):
                assert time.monotonic() < deadline and all(p.poll() in (None, 0) for p in procs), [
                    p.communicate()[1][-2000:] for p in procs if p.poll() not in (None, 0)
                ]
                time.sleep(0.01)
            (work / f"go_{k}").touch()
        return [_report(p) for p in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()


def rewrite_while_compacting(uri: str, work: Path, env: dict[str, str] | None) -> list[dict]:
    """WRITERS processes replacing their own chat ROUNDS times and one compacting the table
    over and over, all released at once."""
    work.mkdir(parents=True, exist_ok=True)
    go, stop = work / "go", work / "stop"
    writers = [_spawn(["rounds", uri, f"chat_{i}", str(ROUNDS), str(go)], env) for i in range(WRITERS)]
    maintainer = _spawn(["maintain", uri, str(stop), str(go)], env)
    try:
        time.sleep(2.0)  # imports done: start together
        go.touch()
        reports = [_report(p) for p in writers]
    finally:
        stop.touch()
        for proc in writers:
            if proc.poll() is None:
                proc.kill()
    return [*reports, _report(maintainer)]


def check_every_chat_once(store: IndexStore, round_: int) -> None:
    """Each chat holds exactly the rows of its last write: none lost, none twice, none stale."""
    from lancedb_writer import BASE  # tests/services is on sys.path (its conftest)

    assert store.chat_files() == [f"chat_{i}" for i in range(WRITERS)]
    for i in range(WRITERS):
        rows = store.messages_for(f"chat_{i}")
        assert rows.height == BASE + round_ and rows["message_id"].n_unique() == rows.height
        assert set(rows["raw_text"].to_list()) == {f"round {round_}"}
    assert store.row_counts()["messages"] == WRITERS * (BASE + round_)
    assert store.full_text_search("messages", "chat_0", "message", 5)


def check_both(uris: list[str], last: str, work: Path, env: dict[str, str] | None, options=None) -> dict:
    raced = race_first_writes(uris, work / "race", env)
    for uri in uris:
        check_every_chat_once(IndexStore(uri, storage_options=options), 1)
    rewritten = rewrite_while_compacting(last, work / "rounds", env)
    check_every_chat_once(IndexStore(last, storage_options=options), ROUNDS)
    assert rewritten[-1]["maintained"] >= 1
    return {
        "creation race": [r["conflicts_redone"] for r in raced],
        "creates undone": [r["overwrites_undone"] for r in raced],
        "rewrites": [r["conflicts_redone"] for r in rewritten[:-1]],
        "compaction": rewritten[-1]["conflicts_redone"],
    }


@pytest.mark.timeout(600)
@pytest.mark.e2e
def test_parallel_writers_on_a_local_folder(tmp_path):
    uris = [str(tmp_path / f"store{k}") for k in range(RACES)]
    print("conflicts redone:", check_both(uris, str(tmp_path / "rewritten"), tmp_path / "work", None))


@pytest.mark.services
@pytest.mark.timeout(600)
def test_parallel_writers_on_the_s3_compatible_server(tmp_path, services, s3_bucket):
    import os

    from nm_services import s3_env

    settings = s3_env(services, s3_bucket)
    base = settings.pop("NM_LANCEDB_URI")
    options = {
        "aws_endpoint": services.s3_endpoint,
        "allow_http": "true",
        "aws_access_key_id": settings["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": settings["AWS_SECRET_ACCESS_KEY"],
        "aws_region": settings["AWS_REGION"],
    }
    # The writers get the object store's settings the standard way (LanceDB reads AWS_*).
    env = {**os.environ, **settings}
    uris = [f"{base}/store{k}" for k in range(RACES)]
    print("conflicts redone:", check_both(uris, f"{base}/rewritten", tmp_path / "work", env, options))


def test_an_overwrite_by_a_late_create_is_undone(tmp_path):
    """What a racing create does at worst (an empty table committed over a written one) is put
    back by the writer whose create it was."""
    import lancedb
    from lancedb_writer import rows

    store = IndexStore(str(tmp_path / "lancedb"))
    store.replace_partition("messages", "chat_0", rows("chat_0", 1))
    store.replace_partition("messages", "chat_1", rows("chat_1", 1))
    late = lancedb.connect(str(tmp_path / "lancedb")).create_table(
        "messages", schema=rows("x", 1).schema, mode="overwrite"
    )
    assert late.count_rows() == 0
    store._undo_overwrite("messages", late.version)
    check = IndexStore(str(tmp_path / "lancedb"))
    assert check.chat_files() == ["chat_0", "chat_1"]
    assert all(check.messages_for(c).height == 31 for c in ("chat_0", "chat_1"))
