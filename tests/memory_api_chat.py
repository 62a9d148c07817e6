"""A tiny hand-made chat indexed into a real LanceDB through index_store's row builders, for
the events / recall-run / search API tests. Importance tiers and reference strengths are set
by hand so recall-run items carry known values."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import polars as pl

from narrative_mirror import schema
from narrative_mirror.embedding import message_texts
from narrative_mirror.index_rows import build_rows
from narrative_mirror.index_store import IndexStore
from narrative_mirror.retrieval.engine import Retriever

CHAT = "tiny_bakery_Ana_Ben"
START = datetime(2024, 3, 1, 9, 0)

# (day offset, speaker, text, importance tier, refs); local id D<day>:<n>, two blocks per day.
MESSAGES = [
    (0, "Ana", "I start my new job at the Elm Street bakery tomorrow.", 2, 0.0),
    (0, "Ben", "Good luck! Do they bake rye bread there?", 0, 0.0),
    (0, "Ana", "Yes, rye and sourdough, every morning at five.", 1, 0.0),
    (0, "Ben", "My marathon training starts next week.", 1, 0.0),
    (10, "Ana", "First week at the bakery went great, I baked forty loaves of rye.", 3, 0.5),
    (10, "Ben", "Save me a loaf of that rye bread!", 0, 0.2),
    (10, "Ben", "I ran thirty kilometres for the marathon on Sunday.", 1, 0.3),
    (10, "Ana", "Wow, rest your legs after that long run.", 0, 0.0),
]
BLOCK_OF = [0, 0, 0, 1, 2, 2, 3, 3]


def chat_frames(chat_file: str = CHAT) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(messages, blocks, signals) of the tiny chat."""
    msg_rows, signal_rows = [], []
    counters: dict[int, int] = {}
    for position, (day, speaker, text, tier, refs) in enumerate(MESSAGES):
        counters[day] = counters.get(day, 0) + 1
        local_id = f"D{day + 1}:{counters[day]}"
        msg_rows.append(
            {
                "message_id": f"{chat_file}/{local_id}",
                "chat_file": chat_file,
                "local_id": local_id,
                "position": position,
                "session": 1 if day == 0 else 2,
                "speaker": speaker,
                "text": text,
                "timestamp": START + timedelta(days=day, minutes=position),
                "image_urls": [],
                "image_caption": "",
            }
        )
        signal_rows.append(
            {
                "message_id": f"{chat_file}/{local_id}",
                "chat_file": chat_file,
                "local_id": local_id,
                "block_id": f"{chat_file}/S{1 if day == 0 else 2}/B{BLOCK_OF[position]}",
                "entities": [],
                "temporal": [],
                "is_plan": False,
                "is_question": text.endswith("?"),
                "sentiment": 0.0,
                "emotion": "",
                "has_image": False,
                "ref_block_ids": [],
                "refs": refs,
                "importance_tier": tier,
            }
        )
    messages = pl.DataFrame(msg_rows, schema=schema.MESSAGES)
    signals = pl.DataFrame(signal_rows, schema=schema.MESSAGE_SIGNALS)
    block_rows = []
    for b in sorted(set(BLOCK_OF)):
        rows = [i for i, x in enumerate(BLOCK_OF) if x == b]
        first, last = msg_rows[rows[0]], msg_rows[rows[-1]]
        block_rows.append(
            {
                "block_id": signal_rows[rows[0]]["block_id"],
                "chat_file": chat_file,
                "session": first["session"],
                "block_index": b,
                "first_position": rows[0],
                "last_position": rows[-1],
                "message_ids": [msg_rows[i]["local_id"] for i in rows],
                "start_time": first["timestamp"],
                "end_time": last["timestamp"],
                "speakers": sorted({msg_rows[i]["speaker"] for i in rows}),
                "keywords": [],
                "label": "",
                "summary": "",
            }
        )
    return messages, pl.DataFrame(block_rows, schema=schema.BLOCKS), signals


def build_retriever(uri: Path, embedder, chat_file: str = CHAT) -> Retriever:
    """A real LanceDB index of the tiny chat at ``uri`` and a Retriever over it."""
    messages, blocks, signals = chat_frames(chat_file)
    vectors = embedder.encode(message_texts(messages))
    embeddings = pl.DataFrame(
        {
            "message_id": messages["message_id"],
            "chat_file": messages["chat_file"],
            "local_id": messages["local_id"],
            "vector": [v.tolist() for v in vectors],
        },
        schema=schema.MESSAGE_EMBEDDINGS,
    )
    store = IndexStore(str(uri))
    for table, rows in build_rows(messages, embeddings, signals=signals, blocks=blocks).items():
        store.replace_partition(table, chat_file, rows)
    return Retriever(store, embedder)
