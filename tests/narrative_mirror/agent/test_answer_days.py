"""Relative dates read against the day a message belongs to: a day's late reply, written past
midnight, still says "today" of the day its conversation began (RealTalk's "D" number is the
day). Asked offline of a tiny chat in a real LanceDB with the real embedder and retriever; and
the slot reader's further look for a count."""

from __future__ import annotations

from datetime import datetime

import pytest

from narrative_mirror import settings
from narrative_mirror.agent.answer import EvidenceMessage, offline_answer
from narrative_mirror.agent.grading import FacetMatch
from narrative_mirror.index_store import IndexStore
from narrative_mirror.query import ask
from narrative_mirror.retrieval.engine import Retriever
from narrative_mirror.retrieval.records import ChatMessage

from .conftest import index_chat

LATE = "tiny_late_night"
# Day 5 begins at 23:56 on 5 March; its messages are 2 minutes apart, so D5:3 and D5:4 are
# written on 6 March.
SESSIONS = [
    (
        datetime(2024, 3, 5, 23, 56),
        [
            ("talk", "Ana", "Hey Ben, how was your evening?"),
            ("talk", "Ben", "Long day, I just got home."),
            ("talk", "Ana", "Anything happen?"),
            ("talk", "Ben", "I sprained my ankle today at football practice."),
        ],
    ),
    (
        datetime(2024, 3, 9, 10, 0),
        [
            ("garden", "Ana", "The tomato seedlings sprouted on the balcony."),
            ("garden", "Ben", "Nice, water them every day."),
        ],
    ),
]


@pytest.fixture(scope="module")
def late(embedder, tmp_path_factory) -> Retriever:
    store = IndexStore(str(tmp_path_factory.mktemp("late_lancedb")))
    index_chat(store, embedder, LATE, sessions=SESSIONS)
    return Retriever(store, embedder, settings.load_config("retrieval"))


def test_a_late_reply_says_today_of_the_day_it_belongs_to(late):
    result = ask(late, LATE, "When did Ben sprain his ankle?")
    assert result.answer == "5 March 2024" and not result.abstained  # not 6 March, the time it was written
    assert [c.ids for c in result.claims] == [["D5:4"]] and result.claims[0].supported
    assert {e.id: e.timestamp.day for e in result.evidence}["D5:4"] == 6  # the evidence keeps its own time


def _message(
    local_id: str, position: int, text: str, written: datetime, day: datetime | None = None
) -> EvidenceMessage:
    message = ChatMessage(
        local_id=local_id,
        message_id=f"c/{local_id}",
        position=position,
        session=1,
        speaker="Ben",
        text=text,
        timestamp=written,
    )
    evidence = EvidenceMessage(message, grade=0.9, match=FacetMatch(frozenset(), 0.0, True))
    evidence.day = day
    return evidence


def test_the_offline_answer_reads_dates_against_the_day():
    written, day = datetime(2024, 3, 6, 0, 2), datetime(2024, 3, 5, 23, 56)
    text = "I sprained my ankle yesterday."
    assert (
        offline_answer("When did Ben sprain his ankle?", "when", [_message("D5:4", 3, text, written)])[0]
        == "5 March 2024"
    )
    assert (
        offline_answer("When did Ben sprain his ankle?", "when", [_message("D5:4", 3, text, written, day)])[0]
        == "4 March 2024"
    )


def test_a_count_is_read_further_down_the_evidence():
    written = datetime(2024, 3, 6, 12, 0)
    evidence = [
        _message(f"D5:{n}", n, text, written)
        for n, text in enumerate(
            ["My back hurts.", "The doctor was nice.", "I went home after.", "He said I need to rest for a month."], 1
        )
    ]
    text, claims, _ = offline_answer("For how long does Ben have to rest?", "how_many", evidence)
    assert (text, claims[0].ids) == ("for a month", ["D5:4"])  # the fourth message: past the best three
