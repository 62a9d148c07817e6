"""A where-answer follows the plan: a later message that moves the place ("CHANGE OF PLAN ... meet
at the Archway Arms instead") answers, not the first place said; a message only asking about
another place moves nothing. A WhatsApp export written for this test, read by the export reader
and built into a real LanceDB with the real embedder, asked offline through the whole agent."""

from __future__ import annotations

import pytest
from index_frames import index_whatsapp_text

from narrative_mirror.query import ask

HEN_DO = """\
20/05/2026, 20:15 - Amira: Plan for Friday: everyone meet at Bath Spa station at 5 and we'll walk to the house together
20/05/2026, 20:17 - Priya: perfect 👍
20/05/2026, 20:30 - Sian: is anyone bringing hair straighteners?
20/05/2026, 20:31 - Hannah: me!
27/05/2026, 12:02 - Amira: CHANGE OF PLAN for Friday! Check-in is from 4 so drop your bags at the house and meet at the Archway Arms at the end of our road at 6 instead
27/05/2026, 12:05 - Chloe: even better, closer to the house
28/05/2026, 19:00 - Amira: Saturday dinner is booked at Casa Lupa by the bridge, table for 8
28/05/2026, 19:04 - Priya: what about the Crown for drinks after?
"""


@pytest.fixture(scope="module")
def hen_do(tmp_path_factory, embedder):
    return index_whatsapp_text(tmp_path_factory.mktemp("hen_do"), "Hen do", HEN_DO, embedder)


@pytest.mark.slow
def test_a_later_message_moving_the_place_answers_where(hen_do):
    retriever, key, messages = hen_do
    archway = messages.filter(messages["text"].str.starts_with("CHANGE OF PLAN"))["local_id"][0]
    meeting = ask(retriever, key, "Where are we meeting on Friday?")
    assert "Archway Arms" in meeting.answer and "Bath Spa" not in meeting.answer
    assert meeting.claims[0].ids[0] == archway and meeting.claims[0].supported
    # "what about the Crown for drinks after?" asks; the dinner stays where it was booked
    dinner = ask(retriever, key, "Where is Saturday dinner?")
    assert "Casa Lupa" in dinner.answer and "Crown" not in dinner.answer
