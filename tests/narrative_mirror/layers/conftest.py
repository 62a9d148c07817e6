"""Hand-made chats for the layer tests, built directly as schema.MESSAGES frames."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pytest

from narrative_mirror import schema, settings

CHAT = "chat_t"

# Three sessions of clearly separated topics (the expected blocks are the topics):
# S1 pasta | marathon | (3-hour pause) apartment; S2 pasta again | dog at the vet;
# S3 marathon result | book club. An int before a message = minutes since the previous one.
STORY_SESSIONS: list[list[tuple]] = [
    [
        ("Ana", "I made fresh pasta from scratch last night with flour and eggs."),
        ("Ben", "Homemade pasta! Did you roll the dough by hand?"),
        ("Ana", "Yes, I rolled the dough thin and cut it into tagliatelle."),
        ("Ben", "What sauce did you serve with the tagliatelle?"),
        ("Ana", "A simple tomato and basil sauce with lots of parmesan."),
        ("Ben", "That pasta dinner sounds delicious, save me a plate next time."),
        ("Ana", "By the way, how is your marathon training going?"),
        ("Ben", "I ran twenty miles on Sunday, my longest run so far."),
        ("Ana", "Wow, are your knees holding up with all that running?"),
        ("Ben", "My left knee aches a bit after long runs, so I ice it."),
        ("Ana", "Are you still planning to run the Boston marathon in April?"),
        ("Ben", "Yes, the race is in April and I want to finish under four hours."),
        (180, "Ana", "Big news, we signed the lease on a new apartment downtown."),
        ("Ben", "Congrats on the apartment! When do you move in?"),
        ("Ana", "The movers come on the first, and we still have to pack every box."),
        ("Ben", "Packing is the worst part of moving, I can help carry boxes."),
        ("Ana", "Thanks, the new apartment has two bedrooms and a balcony."),
        ("Ben", "A balcony downtown is great, you can put plants out there."),
    ],
    [
        ("Ben", "I tried your pasta recipe and the dough was too sticky."),
        ("Ana", "Add more flour while you knead the pasta dough."),
        ("Ben", "Got it, next time I will knead it longer with extra flour."),
        ("Ana", "Fresh pasta only needs two minutes in boiling water."),
        ("Ben", "The tagliatelle came out great after the second try."),
        ("Ana", "Our dog Biscuit has been limping, so we took him to the vet."),
        ("Ben", "Poor Biscuit, what did the vet say?"),
        ("Ana", "The vet thinks he sprained his paw chasing a squirrel."),
        ("Ben", "I hope the puppy rests and his paw heals quickly."),
        ("Ana", "He has to wear a little cone and take it easy for a week."),
    ],
    [
        ("Ben", "I finished the Boston marathon yesterday in three hours fifty!"),
        ("Ana", "Under four hours, you did it! How were your knees during the race?"),
        ("Ben", "My knee held up until mile twenty, then I just pushed through."),
        ("Ana", "Are you going to run another marathon next year?"),
        ("Ben", "Maybe, but first my legs need a long rest from running."),
        ("Ana", "I joined a book club at the library this month."),
        ("Ben", "Nice, which novel is the book club reading?"),
        ("Ana", "We are reading a mystery novel set in Edinburgh."),
        ("Ben", "I love mystery novels, tell me if the ending is good."),
        ("Ana", "The club meets on Thursdays to discuss a few chapters."),
    ],
]


def messages_frame(
    sessions: list[list[tuple]], chat_file: str = CHAT, start: datetime = datetime(2024, 5, 1, 9, 0)
) -> pl.DataFrame:
    """schema.MESSAGES for ``sessions``: session i is on day i+1, messages a minute apart unless a
    message tuple starts with its own pause in minutes; local ids ``D{session}:{n}``; a third
    (or fourth, after a pause) tuple item is a list of image urls."""
    rows = []
    for s, session in enumerate(sessions, 1):
        time = start + timedelta(days=s - 1)
        for n, message in enumerate(session, 1):
            pause = message[0] if isinstance(message[0], int) else 1
            speaker, text, *rest = message[1:] if isinstance(message[0], int) else message
            time += timedelta(minutes=pause if n > 1 else 0)
            rows.append(
                {
                    "message_id": f"{chat_file}/D{s}:{n}",
                    "chat_file": chat_file,
                    "local_id": f"D{s}:{n}",
                    "position": len(rows),
                    "session": s,
                    "speaker": speaker,
                    "text": text,
                    "timestamp": time,
                    "image_urls": rest[0] if rest else [],
                    "image_caption": "",
                }
            )
    return pl.DataFrame(rows, schema=schema.MESSAGES)


def blocks_frame(messages: pl.DataFrame, groups: list[list[str]]) -> pl.DataFrame:
    """schema.BLOCKS with the given local-id groups as blocks (for tests that fix the blocks)."""
    by_id = {row["local_id"]: row for row in messages.iter_rows(named=True)}
    rows, per_session = [], {}
    for index, ids in enumerate(groups):
        first, last = by_id[ids[0]], by_id[ids[-1]]
        n = per_session.get(first["session"], 0)
        per_session[first["session"]] = n + 1
        rows.append(
            {
                "block_id": f"{first['chat_file']}/S{first['session']}/B{n}",
                "chat_file": first["chat_file"],
                "session": first["session"],
                "block_index": index,
                "first_position": first["position"],
                "last_position": last["position"],
                "message_ids": ids,
                "start_time": first["timestamp"],
                "end_time": last["timestamp"],
                "speakers": list(dict.fromkeys(by_id[i]["speaker"] for i in ids)),
                "keywords": [],
                "label": "",
                "summary": "",
            }
        )
    return pl.DataFrame(rows, schema=schema.BLOCKS)


def encode(embedder, messages: pl.DataFrame) -> np.ndarray:
    return embedder.encode([f"{s}: {t}" for s, t in zip(messages["speaker"], messages["text"])])


@pytest.fixture(scope="session")
def layers_config() -> dict:
    """The packaged layers.toml (read before any test's NM_CONFIG_DIR could change it)."""
    return settings.load_config("layers")


@pytest.fixture(scope="module")
def story(embedder) -> tuple[pl.DataFrame, np.ndarray]:
    messages = messages_frame(STORY_SESSIONS)
    return messages, encode(embedder, messages)


@pytest.fixture
def make_messages():
    """``messages_frame`` (test modules cannot import a conftest by name)."""
    return messages_frame


@pytest.fixture
def make_blocks():
    """``blocks_frame``."""
    return blocks_frame
