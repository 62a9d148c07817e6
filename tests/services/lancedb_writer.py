"""One process of the LanceDB concurrency tests (storage options: the AWS_* variables).

    python lancedb_writer.py race CHAT SYNC_DIR URI...     for each URI in turn, with every other
        writer at once: the first write of CHAT into a store whose tables do not exist yet
    python lancedb_writer.py rounds URI CHAT ROUNDS GO_FILE   replace CHAT's rows ROUNDS times
        (round r writes BASE + r rows tagged "round r")
    python lancedb_writer.py maintain URI STOP_FILE GO_FILE   the store's upkeep (compaction), over and over

Prints one JSON line: what it did and how many commit conflicts it redid."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from narrative_mirror import index_store
from narrative_mirror.index_rows import message_schema
from narrative_mirror.index_store import IndexStore

BASE = 30
DIM = 4

conflicts = 0
_is_conflict = index_store.is_commit_conflict


def _counting(exc):
    global conflicts
    found = _is_conflict(exc)
    conflicts += found
    return found


index_store.is_commit_conflict = _counting

undone = 0
_undo = IndexStore._undo_overwrite


def _counting_undo(self, table, version):
    global undone
    undone += 1
    return _undo(self, table, version)


IndexStore._undo_overwrite = _counting_undo


def rows(chat: str, round_: int) -> pa.Table:
    n = BASE + round_
    vectors = np.random.default_rng(round_).random((n, DIM), dtype=np.float32)
    data = {
        "message_id": [f"{chat}/m{i}" for i in range(n)],
        "chat_file": [chat] * n,
        "local_id": [f"m{i}" for i in range(n)],
        "position": list(range(n)),
        "session": [1] * n,
        "speaker": ["a"] * n,
        "raw_text": [f"round {round_}"] * n,
        "text": [f"a: round {round_} message {i} of {chat}" for i in range(n)],
        "timestamp": [None] * n,
        "block_id": [None] * n,
        "refs": [0.0] * n,
        "importance_tier": [0] * n,
        "entities": [[] for _ in range(n)],
        "temporal": [[] for _ in range(n)],
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), DIM),
        "reply_to": [None] * n,
        "edited": [False] * n,
        "bot": [False] * n,
        "reactions": [[] for _ in range(n)],
    }
    return pa.table(data, schema=message_schema(DIM))


def wait_for(path: Path, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{path} never appeared")
        time.sleep(0.005)


def main() -> None:
    mode = sys.argv[1]
    if mode == "race":
        chat, sync, uris = sys.argv[2], Path(sys.argv[3]), sys.argv[4:]
        for k, uri in enumerate(uris):
            store = IndexStore(uri)
            (sync / f"ready_{k}_{chat}").touch()
            wait_for(sync / f"go_{k}")
            store.replace_partition("messages", chat, rows(chat, 1))
        print(
            json.dumps({"chat": chat, "stores": len(uris), "conflicts_redone": conflicts, "overwrites_undone": undone})
        )
    elif mode == "rounds":
        uri, chat, rounds, go = sys.argv[2], sys.argv[3], int(sys.argv[4]), Path(sys.argv[5])
        store = IndexStore(uri)
        wait_for(go)
        versions = [store.replace_partition("messages", chat, rows(chat, r)) for r in range(1, rounds + 1)]
        print(json.dumps({"chat": chat, "versions": versions, "conflicts_redone": conflicts}))
    elif mode == "maintain":
        uri, stop, go = sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
        store = IndexStore(uri)
        wait_for(go)
        runs = 0
        while not stop.exists() or runs == 0:
            store.maintain()
            runs += 1
        print(json.dumps({"maintained": runs, "conflicts_redone": conflicts}))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
