"""The demo chats shipped in the package: they load, meet the promised shape, and their gold
evidence and ARC cases point at real messages."""

import re

import polars as pl
import pytest

from narrative_mirror.arcs import arcs_file_for, load_arc_cases
from narrative_mirror.chats import load_chat
from narrative_mirror.gold import gold_qa_frame
from narrative_mirror.settings import DEMO_ARCS_DIR, DEMO_DATA_DIR

DEMO_CHATS = ["demo_garden_Mara_Theo", "demo_harbor_Lena_Sam", "demo_marathon_Ines_Kofi"]


def test_exactly_the_three_demo_chats_ship():
    assert sorted(p.stem for p in DEMO_DATA_DIR.glob("*.json")) == DEMO_CHATS
    assert sorted(p.name for p in DEMO_ARCS_DIR.glob("*.arcs.json")) == [f"{c}.arcs.json" for c in DEMO_CHATS]


@pytest.mark.parametrize("chat_file", DEMO_CHATS)
def test_demo_chat(chat_file):
    chat = load_chat(DEMO_DATA_DIR / f"{chat_file}.json")
    m = chat.messages
    assert chat.format == "realtalk"
    assert chat.notes == []
    assert chat.speakers == chat_file.split("_")[2:4]
    assert set(m["speaker"]) == set(chat.speakers)
    assert 80 <= m.height <= 120
    assert m["session"].n_unique() >= 4
    assert m["timestamp"].is_sorted()
    assert (m["timestamp"].max() - m["timestamp"].min()).days >= 14
    assert m.filter(pl.col("image_urls").list.len() > 0).height >= 2
    # D numbers count days: some session continues the day of the one before it.
    days = m.select(pl.col("session"), pl.col("local_id").str.extract(r"^D(\d+):", 1).cast(pl.Int64).alias("day"))
    assert days.filter(pl.col("day") != pl.col("session")).height > 0

    gold = gold_qa_frame(chat)
    assert 14 <= gold.height <= 20
    assert set(gold["category"]) == {1, 2, 3, 5}
    # LoCoMo's unanswerable (adversarial) questions: a bait answer, no evidence
    unanswerable = gold.filter(pl.col("category") == 5)
    assert unanswerable.height == 2 and (unanswerable["gold_ids"].list.len() == 0).all()
    assert (gold.filter(pl.col("category") != 5)["gold_ids"].list.len() > 0).all()
    raw = [r for row in gold["evidence_raw"] for r in row]
    assert any(re.fullmatch(r"D\d+:\d+-D\d+:\d+", r) for r in raw)  # a range
    assert any(";" in r for r in raw)  # a ';' list
    assert any(r.endswith(".") for r in raw)  # a stray dot
    # Every gold id names a message of the chat: the demo prints no warning about its own data.
    assert gold["unresolved"].list.len().sum() == 0

    arcs = load_arc_cases(arcs_file_for(DEMO_ARCS_DIR, chat_file), m)
    assert 2 <= arcs.height <= 3
    assert arcs["phase_names"].list.len().is_between(3, 5).all()
