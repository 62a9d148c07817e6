from __future__ import annotations

import copy

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from narrative_mirror import schema
from narrative_mirror.layers import BLOCK_SIGNALS, block_signals, compute_signals
from narrative_mirror.layers.l15_signals import (
    extract_entities,
    is_plan,
    is_question,
    proper_vocabulary,
    sentiment_and_emotion,
    speaks_of_self,
    temporal_expressions,
)

TRIP_SESSIONS = [
    [
        ("Ana", "We spent the weekend in Lisbon with Marta and our cat Coco."),
        ("Ben", "Lisbon is lovely! Did Marta like the trams?"),
        ("Ana", "lol"),
        ("Ben", "I'm going to visit Porto next week, can Coco stay with you?"),
    ],
    [
        ("Ana", "Marta sent me more photos from Lisbon and Coco."),
        ("Ben", "Ana, how was the trip?"),
        ("Ana", "Not good, I got sick and missed the museum."),
        ("Ben", "Here is my new bike", ["https://img.example/bike.jpg"]),
    ],
]
TRIP_BLOCKS = [["D1:1", "D1:2"], ["D1:3", "D1:4"], ["D2:1", "D2:2"], ["D2:3", "D2:4"]]


@pytest.fixture
def trip(make_messages, make_blocks, layers_config):
    messages = make_messages(TRIP_SESSIONS)
    config = copy.deepcopy(layers_config)
    # 4 blocks: an entity in more than 2 of them (Coco, in 3) is too common to be a reference.
    config["l15"]["common_entity_block_share"] = 0.5
    return messages, make_blocks(messages, TRIP_BLOCKS), config


def test_signals_of_a_crafted_chat(trip):
    messages, blocks, config = trip
    signals = compute_signals(messages, blocks, config)
    assert signals.schema == pl.Schema(schema.MESSAGE_SIGNALS)
    assert signals["message_id"].to_list() == messages["message_id"].to_list()
    assert signals["block_id"].to_list() == [
        f"chat_t/S{s}/B{b}" for s, b in [(1, 0), (1, 0), (1, 1), (1, 1), (2, 0), (2, 0), (2, 1), (2, 1)]
    ]
    assert signals["entities"].to_list() == [
        ["lisbon", "marta", "coco"],
        ["lisbon", "marta"],
        [],
        ["porto", "coco"],
        ["marta", "lisbon", "coco"],
        ["ana"],  # speaker name
        [],
        [],
    ]
    assert signals["temporal"].to_list() == [["the weekend"], [], [], ["next week"], [], [], [], []]
    assert signals["is_plan"].to_list() == [False, False, False, True, False, False, False, False]
    assert signals["is_question"].to_list() == [False, True, False, True, False, True, False, False]
    assert signals["sentiment"].to_list() == pytest.approx([0.0, 0.5, 0.0, 0.0, 0.0, 0.0, -2 / 3, 0.0])
    assert signals["has_image"].to_list() == [False] * 7 + [True]
    # Only D2:1 refers back: Marta and Lisbon were in block S1/B0; Coco is too common, Ana a speaker.
    assert signals["ref_block_ids"].to_list() == [[], [], [], [], ["chat_t/S1/B0"], [], [], []]
    assert signals["refs"].to_list() == pytest.approx([0, 0, 0, 0, 1 / 3, 0, 0, 0])
    # Points: D1:1 temporal+entity; D1:2 entity+sentiment; D1:4 plan+temporal+entity;
    # D2:1 entity+reference; D2:3 sentiment; D2:4 image; "lol" and "Ana, how was the trip?" are trivial.
    assert signals["importance_tier"].to_list() == [2, 2, 0, 3, 2, 0, 1, 1]


def test_signals_are_deterministic(trip):
    messages, blocks, config = trip
    assert_frame_equal(compute_signals(messages, blocks, config), compute_signals(messages, blocks, config))


def test_refs_keep_the_most_recent_blocks_and_saturate(make_messages, make_blocks, layers_config):
    sessions = [[("Ana", f"Back at the Harbor Cafe with Marta, visit number {n}.")] for n in range(1, 6)]
    sessions.append([("Ben", "Nice"), ("Ana", "Marta says the Harbor Cafe has new owners.")])
    messages = make_messages(sessions)
    blocks = make_blocks(messages, [[f"D{s}:1"] for s in range(1, 6)] + [["D6:1", "D6:2"]])
    config = copy.deepcopy(layers_config)
    config["l15"].update(common_entity_block_share=1.0, refs_saturation=3, max_ref_blocks=2)
    signals = compute_signals(messages, blocks, config)
    assert signals["entities"][6].to_list() == ["marta", "harbor cafe"]
    assert signals["ref_block_ids"][6].to_list() == ["chat_t/S4/B0", "chat_t/S5/B0"]
    assert signals["refs"].to_list() == pytest.approx([0, 1 / 3, 2 / 3, 1, 1, 0, 1])


def test_block_signals_aggregate(trip):
    messages, blocks, config = trip
    aggregated = block_signals(compute_signals(messages, blocks, config))
    assert aggregated.schema == pl.Schema(BLOCK_SIGNALS)
    assert aggregated.to_dicts() == [
        {"block_id": "chat_t/S1/B0", "chat_file": "chat_t", "n_messages": 2, "entities": ["lisbon", "marta", "coco"],
         "has_plan": False, "n_questions": 1, "mean_sentiment": 0.25, "max_tier": 2},
        {"block_id": "chat_t/S1/B1", "chat_file": "chat_t", "n_messages": 2, "entities": ["coco", "porto"],
         "has_plan": True, "n_questions": 1, "mean_sentiment": 0.0, "max_tier": 3},
        {"block_id": "chat_t/S2/B0", "chat_file": "chat_t", "n_messages": 2, "entities": ["ana", "coco", "lisbon", "marta"],
         "has_plan": False, "n_questions": 1, "mean_sentiment": 0.0, "max_tier": 2},
        {"block_id": "chat_t/S2/B1", "chat_file": "chat_t", "n_messages": 2, "entities": [],
         "has_plan": False, "n_questions": 0, "mean_sentiment": pytest.approx(-1 / 3), "max_tier": 1},
    ]  # fmt: skip


def test_blocks_must_cover_each_message_once(trip, make_blocks):
    messages, _, config = trip
    with pytest.raises(ValueError, match=r"messages in no block: \['D2:3', 'D2:4'\]"):
        compute_signals(messages, make_blocks(messages, TRIP_BLOCKS[:3]), config)
    with pytest.raises(ValueError, match="message D1:2 is in two blocks"):
        compute_signals(messages, make_blocks(messages, [["D1:1", "D1:2"], ["D1:2"]] + TRIP_BLOCKS[1:]), config)
    with pytest.raises(ValueError, match=r"layers\.toml: l15\.refs_saturation: expected an integer, got '3'"):
        bad = copy.deepcopy(config)
        bad["l15"]["refs_saturation"] = "3"
        compute_signals(messages, make_blocks(messages, TRIP_BLOCKS), bad)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Let's meet next Friday at 5:30 pm or tomorrow morning", ["next Friday", "at 5:30 pm", "tomorrow morning"]),
        ("I may go on May 3rd", ["May 3rd"]),
        ("We moved here 2 years ago, in March", ["2 years ago", "in March"]),
        ("Christmas in December was fun", ["Christmas", "in December"]),
        ("Back in a few days, on 12/05/2024 or 2024-05-14", ["in a few days", "12/05/2024", "2024-05-14"]),
        ("around 20 people came and we may march", []),
        ("tonight? no, this weekend", ["tonight", "this weekend"]),
        # "İ" lower-cases to two characters: spans must still come from the text as written
        ("İstanbul NEXT WEEK, then İzmir on Monday", ["NEXT WEEK", "on Monday"]),
    ],
)
def test_temporal_expressions(text, expected):
    assert temporal_expressions(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I'm going to visit Lisbon next week", True),
        ("I’ll call you later", True),  # curly apostrophe
        ("im gonna sleep", True),
        ("We fly out on Friday", True),  # first person + future time
        ("I have to finish the report", True),
        ("Let's grab coffee", True),
        ("It's going to rain", False),  # not the speaker's action
        ("I went there yesterday", False),
        ("I have a dog", False),
        ("The shop is next to my house", False),
    ],
)
def test_is_plan(text, expected):
    assert is_plan(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Where did you go?", True),
        ("how was the trip", True),
        ("Did you eat", True),
        ("I know how it works", False),
        ("Nice.", False),
    ],
)
def test_is_question(text, expected):
    assert is_question(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I love hiking", True),
        ("My sister visited", True),
        ("We’re moving in May", True),
        ("im tired", True),
        ("Along the river path", False),
        ("Cherry tomatoes, the seller said", False),
        ("Is it raining?", False),
        ("Hi! I'm Annie.", True),
        ("Italy was lovely", False),
    ],
)
def test_speaks_of_self(text, expected):
    assert speaks_of_self(text) is expected


@pytest.mark.parametrize(
    ("text", "sentiment", "emotion"),
    [
        ("I love it", 0.5, "joy"),
        ("not good", -0.5, ""),  # negated: counts as negative, no emotion
        ("I'm so sad and worried", -2 / 3, "sadness"),  # sadness/fear tie: the first listed wins
        ("Thank you, I really appreciate it :)", 2 / 3, "gratitude"),
        ("hello there", 0.0, ""),
    ],
)
def test_sentiment_and_emotion(text, sentiment, emotion):
    score, label = sentiment_and_emotion(text)
    assert score == pytest.approx(sentiment)
    assert label == emotion


def test_entities_follow_the_chats_capitalization():
    texts = [
        "We went to New York with Sam.",
        "New York was loud, Sam loved it.",
        "I got a new job!",
        "We ate at the Bank of America stadium.",
        "Ana and I are back from miami, Miami was hot, we love Miami and Miami loves us",
    ]
    vocabulary = proper_vocabulary(texts)
    # Weak (lower-case more than a quarter as often as capitalized mid-sentence): "new" 1:1,
    # "miami" 1:3. "Ana" only starts a sentence, so it is no vocabulary word (but a speaker).
    assert vocabulary == {"new": False, "york": True, "sam": True, "bank": True, "america": True, "miami": False}
    speakers = {"ana"}
    assert extract_entities(texts[0], vocabulary, speakers) == ["new york", "sam"]
    assert extract_entities(texts[1], vocabulary, speakers) == ["new york", "sam"]  # anchored by "York"
    assert extract_entities(texts[2], vocabulary, speakers) == []  # weak "new", lower-case
    assert extract_entities(texts[3], vocabulary, speakers) == ["bank of america"]
    assert extract_entities(texts[4], vocabulary, speakers) == ["ana", "miami"]  # only the capitalized Miami
    assert extract_entities("New plans: dinner with ana and sam", vocabulary, speakers) == ["ana", "sam"]
    assert extract_entities("Happy New Year, Sam's party is at Sam's", vocabulary, speakers) == ["new year", "sam"]
