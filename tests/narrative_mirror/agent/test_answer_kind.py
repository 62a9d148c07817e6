"""A who-answer is a person and a how-much answer an amount (issue 39: "who-questions answer with
the author ..., never a place"): when the answer step's value is of another kind ("Lisbon" for who
took over a job, "12 tables" for a refund), verification quotes its best message with who wrote
it and when instead. A WhatsApp export written for this test, read by the export reader and built
into a real LanceDB with the real embedder: the chat's people are what its index knows."""

from __future__ import annotations

import pytest
from index_frames import index_whatsapp_text

from narrative_mirror.agent.answer import Claim
from narrative_mirror.agent.quoting import answers_another_kind

BIRTHDAY = """\
14/11/2026, 08:40 - Ciarán: Lads I'm really sorry, I'm going to have to hand off the slideshow for Nana's party. Work have me in Lisbon all next week
14/11/2026, 08:52 - Emma: I can do it!! I have loads of her photos on the shared album already
14/11/2026, 09:05 - Aoife: legend Emma 🙌
15/11/2026, 19:10 - Aoife: Hall is booked for the 28th, 12 tables, we refunded the Doyles their £40 since they can't come
15/11/2026, 19:12 - Ciarán: grand, I'll sort the music from Lisbon
16/11/2026, 10:00 - Emma: Rico from the hall says parking is round the back on Chandos Rd
"""


@pytest.fixture(scope="module")
def birthday(tmp_path_factory, embedder):
    return index_whatsapp_text(tmp_path_factory.mktemp("birthday"), "Nana's party", BIRTHDAY, embedder)


def test_a_place_or_a_street_answers_no_who_question_and_a_count_no_how_much(birthday):
    retriever, key, _ = birthday
    chat = retriever.chat(key)
    who = "Who's doing the slideshow now?"
    assert answers_another_kind([Claim("Lisbon")], who, chat)
    assert answers_another_kind([Claim("Chandos Rd")], who, chat)
    assert not answers_another_kind([Claim("Emma")], who, chat)  # a person of the chat
    assert not answers_another_kind([Claim("Rico")], who, chat)  # a name that is no place
    assert not answers_another_kind([Claim("Lisbon"), Claim("Emma")], who, chat)
    refund = "How much did we refund the Doyles?"
    assert answers_another_kind([Claim("12 tables")], refund, chat)
    assert not answers_another_kind([Claim("£40")], refund, chat)
    # not asked for an amount or a person: any value stands
    assert not answers_another_kind([Claim("a week")], "How much time is Ciarán away?", chat)
    assert not answers_another_kind([Claim("Lisbon")], "Where is Ciarán working next week?", chat)
