from __future__ import annotations

import copy
from datetime import datetime

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from narrative_mirror import schema
from narrative_mirror.layers import ExtractiveSummarizer, build_topic_blocks
from narrative_mirror.layers.l1_topics import gap_depths, message_lines, segment_session
from narrative_mirror.layers.params import L1Params, SummaryParams, section

EXPECTED_BLOCKS = [  # the hand-made story's topics
    ("chat_t/S1/B0", 1, [f"D1:{n}" for n in range(1, 7)]),  # pasta
    ("chat_t/S1/B1", 1, [f"D1:{n}" for n in range(7, 13)]),  # marathon training
    ("chat_t/S1/B2", 1, [f"D1:{n}" for n in range(13, 19)]),  # after a 3-hour pause: apartment
    ("chat_t/S2/B0", 2, [f"D2:{n}" for n in range(1, 6)]),  # pasta again
    ("chat_t/S2/B1", 2, [f"D2:{n}" for n in range(6, 11)]),  # dog at the vet
    ("chat_t/S3/B0", 3, [f"D3:{n}" for n in range(1, 6)]),  # marathon result
    ("chat_t/S3/B1", 3, [f"D3:{n}" for n in range(6, 11)]),  # book club
]


def with_l1(config: dict, **values) -> dict:
    changed = copy.deepcopy(config)
    changed["l1"].update(values)
    return changed


def test_story_splits_into_its_topics(story, layers_config):
    messages, vectors = story
    blocks = build_topic_blocks(messages, vectors, layers_config)

    assert blocks.schema == pl.Schema(schema.BLOCKS)
    assert [
        (b, s, ids) for b, s, ids in blocks.select("block_id", "session", "message_ids").iter_rows()
    ] == EXPECTED_BLOCKS
    assert blocks["block_index"].to_list() == list(range(7))
    assert blocks["first_position"].to_list() == [0, 6, 12, 18, 23, 28, 33]
    assert blocks["last_position"].to_list() == [5, 11, 17, 22, 27, 32, 37]
    assert blocks["start_time"][2] == datetime(2024, 5, 1, 12, 11)  # 11 minutes + the 3-hour pause
    assert blocks["end_time"][2] == datetime(2024, 5, 1, 12, 16)
    assert blocks["speakers"].to_list() == [["Ana", "Ben"]] * 3 + [["Ben", "Ana"]] + [["Ana", "Ben"]] + [
        ["Ben", "Ana"]
    ] + [["Ana", "Ben"]]


def test_every_message_in_exactly_one_block_within_its_session(story, layers_config):
    messages, vectors = story
    blocks = build_topic_blocks(messages, vectors, layers_config)
    all_ids = [i for ids in blocks["message_ids"].to_list() for i in ids]
    assert all_ids == messages["local_id"].to_list()
    session_of = dict(zip(messages["local_id"], messages["session"]))
    for session, ids in zip(blocks["session"], blocks["message_ids"]):
        assert {session_of[i] for i in ids} == {session}


def test_same_input_gives_identical_blocks(story, layers_config):
    messages, vectors = story
    assert_frame_equal(
        build_topic_blocks(messages, vectors, layers_config), build_topic_blocks(messages, vectors, layers_config)
    )


def test_offline_keywords_label_and_summary(story, layers_config):
    messages, vectors = story
    blocks = build_topic_blocks(messages, vectors, layers_config)
    pasta, marathon, apartment, _, dog, _, books = blocks.iter_rows(named=True)
    assert "pasta" in pasta["keywords"] and "marathon" in marathon["keywords"]
    assert {"apartment", "balcony"} <= set(apartment["keywords"])
    assert {"vet", "biscuit"} <= set(dog["keywords"])
    assert "ana" not in pasta["keywords"] and "ben" not in pasta["keywords"]  # speakers are no keywords
    for block in blocks.iter_rows(named=True):
        assert len(block["keywords"]) == layers_config["l1"]["keywords"]
        assert block["label"] == ", ".join(block["keywords"][:3])
    # The summary quotes the block's most central messages, in order.
    assert books["summary"].startswith(("Ana: ", "Ben: "))
    quoted = [part.split(": ", 1)[1] for part in books["summary"].split(" … ")]
    book_texts = messages.filter(pl.col("local_id").is_in(books["message_ids"]))["text"].to_list()
    assert len(quoted) == 2 and all(q in book_texts for q in quoted)


def test_summarizer_supplies_label_and_summary(story, layers_config):
    messages, vectors = story
    summarizer = ExtractiveSummarizer(section(layers_config, "summary", SummaryParams))
    blocks = build_topic_blocks(messages, vectors, layers_config, summarizer=summarizer)
    lines = message_lines(messages)
    assert (blocks["label"][0], blocks["summary"][0]) == summarizer.summarize("block", lines[0:6])
    assert blocks["message_ids"].to_list() == [ids for _, _, ids in EXPECTED_BLOCKS]


def test_long_pause_always_starts_a_block(make_messages, embedder, layers_config):
    # One topic; a 2-hour pause after the 2nd message splits it even below min_block_messages.
    messages = make_messages(
        [
            [
                ("Ana", "The garden tomatoes are finally turning red."),
                ("Ben", "Your tomato plants looked great last week."),
                (120, "Ana", "I picked a full basket of tomatoes this morning."),
                ("Ben", "Will you make tomato sauce with them?"),
                ("Ana", "Yes, a big pot of tomato sauce for the winter."),
                ("Ben", "Save me a jar of that tomato sauce."),
            ]
        ]
    )
    vectors = embedder.encode([f"{s}: {t}" for s, t in zip(messages["speaker"], messages["text"])])
    blocks = build_topic_blocks(messages, vectors, layers_config)
    assert blocks["message_ids"].to_list() == [["D1:1", "D1:2"], ["D1:3", "D1:4", "D1:5", "D1:6"]]
    assert blocks["block_id"].to_list() == ["chat_t/S1/B0", "chat_t/S1/B1"]


def test_depth_peaks_at_the_topic_change():
    e1, e2 = np.eye(2, dtype=np.float32)
    vectors = np.stack([e1] * 4 + [e2] * 4)
    depths = gap_depths(vectors, window=2)
    # Similarity falls from 1 to 0 and climbs back to 1: depth (1 - 0) + (1 - 0).
    assert depths[4] == pytest.approx(2.0)
    assert int(np.argmax(depths)) == 4
    assert depths[1] == pytest.approx(0.0, abs=1e-9) and depths[7] == pytest.approx(0.0, abs=1e-9)


def test_segment_session_min_and_max_sizes():
    e1, e2, e3 = np.eye(3, dtype=np.float32)
    vectors = np.stack([e1] * 2 + [e2] * 6 + [e3] * 6)
    no_pauses = np.zeros(len(vectors))
    params = L1Params(
        window=2, depth_threshold=0.5, time_gap_minutes=60, min_block_messages=3, max_block_messages=40, keywords=8
    )
    # The change after 2 messages would leave a 2-message block: only the one at 8 is taken.
    assert segment_session(vectors, no_pauses, params) == [(0, 8), (8, 14)]
    small = L1Params(
        window=2, depth_threshold=0.5, time_gap_minutes=60, min_block_messages=1, max_block_messages=40, keywords=8
    )
    assert segment_session(vectors, no_pauses, small) == [(0, 2), (2, 8), (8, 14)]
    # Without meaning-based cuts, a block over max_block_messages is split at its deepest gap
    # that leaves min_block_messages on both sides: 14 -> 8 + 6 at the e2/e3 change, then
    # 8 -> 3 + 5 (gap 2, the e1/e2 change, would leave 2; gap 3 is the next deepest).
    capped = L1Params(
        window=2, depth_threshold=99.0, time_gap_minutes=60, min_block_messages=3, max_block_messages=6, keywords=8
    )
    assert segment_session(vectors, no_pauses, capped) == [(0, 3), (3, 8), (8, 14)]


def test_single_message_session(make_messages, embedder, layers_config):
    messages = make_messages([[("Ana", "Hello there")], [("Ben", "Hi!"), ("Ana", "How are you?")]])
    vectors = embedder.encode(message_lines(messages))
    blocks = build_topic_blocks(messages, vectors, layers_config)
    assert blocks["message_ids"].to_list() == [["D1:1"], ["D2:1", "D2:2"]]
    assert blocks["block_id"].to_list() == ["chat_t/S1/B0", "chat_t/S2/B0"]


def test_empty_chat_gives_empty_frame(layers_config):
    blocks = build_topic_blocks(schema.empty_frame(schema.MESSAGES), np.zeros((0, 384), np.float32), layers_config)
    assert blocks.height == 0 and blocks.schema == pl.Schema(schema.BLOCKS)


def test_bad_inputs_are_named(story, layers_config):
    messages, vectors = story
    with pytest.raises(ValueError, match=r"vectors shape \(37, 384\) does not match 38 messages"):
        build_topic_blocks(messages, vectors[:-1], layers_config)
    with pytest.raises(ValueError, match="strictly increasing position"):
        build_topic_blocks(messages.reverse(), vectors, layers_config)
    with pytest.raises(ValueError, match=r"messages: missing columns \['timestamp'\]"):
        build_topic_blocks(messages.drop("timestamp"), vectors, layers_config)
    nan_vectors = vectors.copy()
    nan_vectors[3, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        build_topic_blocks(messages, nan_vectors, layers_config)
    with pytest.raises(ValueError, match=r"layers\.toml: l1\.window: missing"):
        config = copy.deepcopy(layers_config)
        del config["l1"]["window"]
        build_topic_blocks(messages, vectors, config)
    with pytest.raises(ValueError, match=r"layers\.toml: l1\.window: expected an integer, got 2\.5"):
        build_topic_blocks(messages, vectors, with_l1(layers_config, window=2.5))
    with pytest.raises(ValueError, match="min_block_messages <= max_block_messages"):
        build_topic_blocks(messages, vectors, with_l1(layers_config, min_block_messages=50))


def test_system_lines_stay_members_but_never_name_or_summarize_a_block(make_messages, embedder, layers_config):
    """A group's join, encryption and call lines belong to the transcript: the block keeps them as
    members, but its keywords, label and summary come from what people wrote."""
    messages = make_messages(
        [
            [
                ("", "Messages and calls are end-to-end encrypted. No one outside of this chat can read them."),
                ("Ana", "Ana added Ben"),
                ("Ana", "I made fresh pasta from scratch last night with flour and eggs."),
                ("Ben", "Homemade pasta! Did you roll the dough by hand?"),
                ("Ben", "Missed voice call"),
                ("Ana", "Yes, I rolled the dough thin and cut it into tagliatelle."),
            ]
        ]
    ).with_columns(pl.Series("system", [True, True, False, False, True, False]))
    blocks = build_topic_blocks(messages, embedder.encode(message_lines(messages)), layers_config)
    assert [i for ids in blocks["message_ids"].to_list() for i in ids] == [f"D1:{n}" for n in range(1, 7)]
    told = " ".join(
        blocks["label"].to_list() + blocks["summary"].to_list() + [k for ks in blocks["keywords"].to_list() for k in ks]
    ).lower()
    assert "pasta" in told
    for word in ("encrypted", "added", "call"):
        assert word not in told, (word, told)


def test_a_block_of_system_lines_only_is_named_chat_events(make_messages, embedder, layers_config):
    """A group's opening lines (the encryption notice, "X created group", "X added Y") alone in a
    block: named "chat events", no topic words taken from them, and its summary gives the lines as
    they read (no speaker, so no ": " before them)."""
    messages = make_messages(
        [
            [
                ("", "Messages and calls are end-to-end encrypted. No one outside of this chat can read them."),
                ("", "Ana created group \u201cFamily Trip\u201d"),
                ("", "Ana added Ben"),
            ],
            [
                ("Ana", "I made fresh pasta from scratch last night with flour and eggs."),
                ("Ben", "Homemade pasta! Did you roll the dough by hand?"),
                ("Ana", "Yes, I rolled the dough thin and cut it into tagliatelle."),
            ],
        ]
    ).with_columns(pl.Series("system", [True, True, True, False, False, False]))
    blocks = build_topic_blocks(messages, embedder.encode(message_lines(messages)), layers_config)
    events = blocks.filter(pl.col("session") == 1).row(0, named=True)
    assert events["label"] == "chat events" and events["keywords"] == []
    assert "Ana added Ben" in events["summary"] and not events["summary"].startswith(":")
    assert "pasta" in blocks.filter(pl.col("session") == 2)["label"][0]
