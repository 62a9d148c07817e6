"""What a forget costs in a populated home: a live chat of N messages (log and index rows; random
vectors stand in for the embedder, which a forget never calls), another chat beside it, E
retrieval events and R recall-run files; then forget one message, an author's messages and the
whole chat, each timed, and the home searched for the forgotten texts afterwards.

    PYTHONPATH=. python benchmarks/live_forget.py [--messages 20000] [--events 2000] [--runs 2000]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from narrative_mirror import schema
from narrative_mirror.events.record import RetrievalEvent
from narrative_mirror.events.writer import EventLog
from narrative_mirror.home import Home
from narrative_mirror.index_rows import message_rows
from narrative_mirror.index_store import IndexStore
from narrative_mirror.live.forget import Forgetting, Selection
from narrative_mirror.live.index import messages_frame
from narrative_mirror.live.log import LiveLog
from narrative_mirror.recall_runs import write_run

WORDS = (
    "river stone lamp garden window coffee train letter music paper bread cloud harbor winter "
    "market bicycle candle forest silver orange"
).split()
DIM = 384


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(8)) + f" note{n}"


def populate(home: Path, messages: int, events: int, runs: int) -> tuple[LiveLog, IndexStore]:
    rng = random.Random(7)
    log, store = LiveLog(Home(home).live), IndexStore(str(Home(home).lancedb))
    start = datetime(2025, 1, 1)
    for chat, count in (("big_Ada_Bo", messages), ("other_Cy", 1000)):
        for first in range(0, count, 1000):
            log.append(
                chat,
                [
                    {
                        "id": f"m{i}",
                        "author": "Ada" if i % 3 else "Bo",
                        "text": sentence(rng, i),
                        "timestamp": (start + timedelta(minutes=i)).isoformat() + "Z",
                    }
                    for i in range(first, min(first + 1000, count))
                ],
            )
        stored = log.messages(chat)
        frame = messages_frame(chat, stored)
        vectors = np.random.default_rng(1).standard_normal((len(stored), DIM)).astype("float32")
        embeddings = pl.DataFrame(
            {
                "message_id": frame["message_id"],
                "chat_file": frame["chat_file"],
                "local_id": frame["local_id"],
                "vector": [v.tolist() for v in vectors],
            },
            schema=schema.MESSAGE_EMBEDDINGS,
        )
        store.add_rows("messages", chat, message_rows(frame, embeddings))
    texts = [m.text for m in log.messages("big_Ada_Bo")]
    event_log = EventLog(store.uri, spool_dir=Home(home).event_spool)
    for _ in range(events):
        event_log.log(
            RetrievalEvent(
                "local/u",
                "big_Ada_Bo",
                f"what about {rng.choice(texts)}",
                ["m1"],
                "hybrid",
                created_at=datetime.now(UTC),
            )
        )
    event_log.close()
    for _ in range(runs):
        write_run(
            rng.choice(texts),
            {"chat": "big_Ada_Bo"},
            [{"id": f"m{rng.randrange(messages)}", "text": rng.choice(texts)}],
            [],
            root=Home(home).recall_runs,
        )
    return log, store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="nm-forget-bench-"))
    began = time.perf_counter()
    log, store = populate(home, args.messages, args.events, args.runs)
    print(f"populated {home} in {time.perf_counter() - began:.1f} s")
    forgetting = Forgetting(log, store, home)
    rows = {}
    for name, selection in (
        ("one message", Selection(ids=("m5",))),
        ("an author (Bo)", Selection(author="Bo")),
        ("the whole chat", Selection(everything=True)),
    ):
        gone = [m.text for m in log.select("big_Ada_Bo", ids=selection.ids, author=selection.author)]
        report = forgetting.forget("big_Ada_Bo", selection)
        left = sum(1 for p in home.rglob("*") if p.is_file() and any(t.encode() in p.read_bytes() for t in gone[:50]))
        rows[name] = {
            "messages": len(report["ids"]),
            "seconds": report["seconds"],
            "files_still_quoting": left,
            "events_redacted": report["removed"]["events"]["events_redacted"],
            "recall_runs_redacted": report["removed"]["recall_runs"]["files_redacted"],
            "step_seconds": report["step_seconds"],
        }
        print(name, json.dumps(rows[name]))


if __name__ == "__main__":
    main()
