"""Files under NM_HOME are private to the user: a process that went through
``environment.hand_to_library`` writes 0600 files and 0700 folders (index, parquet, recall
runs, logs). Run in a fresh interpreter: the umask is process-wide."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

BUILD_AND_SEARCH = """
import logging, os
os.umask(0o022)  # what a login shell usually hands a process
from resources import environment
environment.hand_to_library()
import polars as pl
from index_frames import TEXTS, chat_frames
from narrative_mirror.index_rows import build_rows
from narrative_mirror.index_store import IndexStore
from narrative_mirror.recall_runs import write_run

home = environment.nm_home()
store = IndexStore(str(home / "lancedb"))
messages, embeddings, blocks, signals, threads = chat_frames("chat_a", TEXTS)
for table, rows in build_rows(messages, embeddings, signals=signals, blocks=blocks, threads=threads).items():
    store.replace_partition(table, "chat_a", rows)
assert store.messages_for("chat_a").height == len(TEXTS)
(home / "outputs").mkdir(parents=True, exist_ok=True)
messages.write_parquet(home / "outputs" / "messages.parquet")
write_run("bike", {"k": 10}, [], [], root=home / "recall_runs")
(home / "logs").mkdir(exist_ok=True)
logging.basicConfig(filename=home / "logs" / "nm.log")
logging.getLogger("nm").warning("written")
"""


def test_files_under_nm_home_are_private(tmp_path):
    home = tmp_path / "nm_home"
    env = {**os.environ, "NM_HOME": str(home), "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    subprocess.run([sys.executable, "-c", BUILD_AND_SEARCH], env=env, cwd=ROOT, check=True, timeout=120)
    paths = [home, *home.rglob("*")]
    kinds = {p.suffix for p in paths if p.is_file()}
    assert {".lance", ".parquet", ".json", ".log"} <= kinds, kinds
    open_to_others = {
        str(p.relative_to(home)): oct(stat.S_IMODE(p.stat().st_mode)) for p in paths if p.stat().st_mode & 0o077
    }
    assert open_to_others == {}
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
