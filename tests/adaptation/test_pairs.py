"""Training pairs come from the messages only: consecutive cross-speaker pairs and reply links,
never a question, answer or gold id (a chat whose QA is a unique sentinel)."""

from __future__ import annotations

import polars as pl
import pytest
from chat_factory import realtalk_chat, write_chat

from narrative_mirror.adaptation.pairs import chat_pairs, home_pairs, pairs_version, sample_pairs
from narrative_mirror.chats import load_chat

SENTINEL = "zqxjv-sentinel-4471"


def test_pairs_are_a_message_and_the_other_speakers_next_one(tmp_path):
    chat = realtalk_chat(
        [
            [("Ana", "hi"), ("Ana", "are you there"), ("Ben", "yes"), ("Ana", "good")],
            [("Ben", "new day"), ("Ana", "morning")],
        ]
    )
    messages = load_chat(write_chat(tmp_path, "c", chat)).messages
    assert chat_pairs(messages) == [
        ("Ana: are you there", "Ben: yes"),
        ("Ben: yes", "Ana: good"),
        ("Ana: good", "Ben: new day"),
        ("Ben: new day", "Ana: morning"),
    ]


def test_reply_links_add_pairs_and_system_lines_are_skipped():
    frame = pl.DataFrame(
        {
            "local_id": ["1", "2", "3", "4"],
            "position": [0, 1, 2, 3],
            "speaker": ["Ana", "Ben", "Cy", "Cy"],
            "text": ["lunch?", "joined", "what time", "noon works"],
            "image_caption": ["", "", "", ""],
            "reply_to": [None, None, None, "1"],
            "system": [False, True, False, False],
        }
    )
    assert chat_pairs(frame) == [("Ana: lunch?", "Cy: what time"), ("Ana: lunch?", "Cy: noon works")]


def test_no_question_answer_or_gold_text_reaches_a_pair(tmp_path):
    qa = [{"question": f"{SENTINEL} question?", "answer": f"{SENTINEL} answer", "evidence": ["D1:1"], "category": 1}]
    chat = realtalk_chat([[("Ana", "I start at the bakery"), ("Ben", "Which one?"), ("Ana", "Elm Street")]], qa=qa)
    path = write_chat(tmp_path, "c", chat)
    assert SENTINEL in path.read_text()
    pairs = home_pairs([load_chat(path).messages])
    assert len(pairs) == 2 and not any(SENTINEL in text for pair in pairs for text in pair)


def test_sampling_is_bounded_and_repeatable():
    pairs = [(f"a{i}", f"b{i}") for i in range(100)]
    assert sample_pairs(pairs, 10, seed=3) == sample_pairs(pairs, 10, seed=3)
    assert len(sample_pairs(pairs, 10)) == 10 and sample_pairs(pairs, 0) == pairs
    assert pairs_version(pairs) != pairs_version(pairs[:-1])


def test_question_pairs_are_the_turns_that_ask(tmp_path):
    chat = realtalk_chat(
        [
            [
                ("Ana", "I start at the bakery"),
                ("Ben", "Which one?"),
                ("Ana", "Elm Street"),
                ("Ben", "nice"),
                ("Ana", "are you coming?"),
                ("Ana", "say yes"),
                ("Ben", "yes"),
            ]
        ]
    )
    messages = load_chat(write_chat(tmp_path, "c", chat)).messages
    assert chat_pairs(messages, ("questions",)) == [("Ben: Which one?", "Ana: Elm Street")]
    assert len(chat_pairs(messages)) == 5 and chat_pairs(messages, ("turns",)) == chat_pairs(messages)
    with pytest.raises(ValueError, match="windows"):
        chat_pairs(messages, ("windows",))
