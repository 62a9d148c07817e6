"""Answers read from an exchange of a WhatsApp export written for these tests (a choir trip),
asked offline through the whole agent over a real LanceDB with the real embedder: a reply that
takes the task on names its writer, not a place it mentions; a price per night is an amount."""

from __future__ import annotations

import pytest
from index_frames import index_whatsapp_text

from narrative_mirror.agent.exchange_values import EACH_AFTER, amounts
from narrative_mirror.query import ask

CHOIR_TRIP = """\
13/02/2026, 18:00 - Hannah: Choir trip to Edinburgh is confirmed for the 14th of March!
13/02/2026, 18:30 - Marek: Who's booking the hostel?
13/02/2026, 18:45 - Greta: I'll do it, I've used Castle Rock Hostel before
13/02/2026, 18:50 - Yusuf: Legend
15/02/2026, 09:00 - Greta: Hostel booked, 22 a night each, paid with my card, please send me the money
15/02/2026, 09:10 - Yusuf: Sent!
"""


@pytest.fixture(scope="module")
def choir_trip(tmp_path_factory, embedder):
    return index_whatsapp_text(tmp_path_factory.mktemp("choir_trip"), "Choir trip", CHOIR_TRIP, embedder)


def test_a_reply_taking_the_task_on_names_its_writer_not_a_place_it_mentions(choir_trip):
    retriever, key, messages = choir_trip
    answer = ask(retriever, key, "Who booked the hostel?")  # Greta: "I'll do it, I've used Castle Rock Hostel before"
    assert answer.answer == "Greta" and answer.claims[0].supported


def test_a_price_per_night_is_an_amount(choir_trip):
    retriever, key, _ = choir_trip
    ((value, written, after),) = amounts("Hostel booked, 22 a night each, paid with my card")
    assert (value, written) == (22.0, "22") and EACH_AFTER.match(after)
    assert amounts("I take 3 a day") == []  # a count of things, not a price
    answer = ask(retriever, key, "How much is the hostel per night?")
    assert not answer.abstained and answer.answer.startswith("22")
