"""A "which/what <noun>" question asking for one thing is answered only by a message naming that
thing (or a word for it) or by a name: "Which team won the quiz?" is not answered by "8 rounds from
the rugby club quiz" when no message says who won. A WhatsApp export written for this test, read
by the export reader and built into a real LanceDB with the real embedder, asked offline through
the whole agent."""

from __future__ import annotations

import pytest
from index_frames import index_whatsapp_text

from narrative_mirror.agent.answer import NO_ANSWER
from narrative_mirror.agent.slot_nouns import asked_noun
from narrative_mirror.query import ask

QUIZ = """\
01/10/2026, 19:02 - Maggie: Right, roof fund: a quiz night in the hall? last one made about 900
01/10/2026, 19:05 - Gaz: me, I've still got 8 rounds from the rugby club quiz that nobody here will have heard
01/10/2026, 19:09 - Maggie: tickets £10 a head, tables of up to 6
14/10/2026, 20:11 - Deepa: 12 teams booked! the Quizzly Bears want the table by the stage
27/10/2026, 09:30 - Tom: counted up: £1,236 after costs, thanks all
27/10/2026, 09:41 - Maggie: great night. Gaz your music round was evil
02/11/2026, 18:20 - Deepa: I went to Lisbon for half term, Portugal was lovely
"""


@pytest.fixture(scope="module")
def quiz(tmp_path_factory, embedder):
    return index_whatsapp_text(tmp_path_factory.mktemp("quiz"), "Roof fund", QUIZ, embedder)


def test_the_noun_a_which_or_what_question_asks_for():
    assert asked_noun("Which team won the quiz?") == "team"
    assert asked_noun("What size T-shirt is Gareth getting?") == "size"
    assert asked_noun("What time is the quiz?") is None and asked_noun("What did Nana have?") is None
    assert asked_noun("Where is the quiz?") is None


@pytest.mark.slow
def test_a_message_not_naming_the_thing_asked_does_not_answer_it(quiz):
    retriever, key, _ = quiz
    won = ask(retriever, key, "Which team won the quiz?")
    assert won.answer == NO_ANSWER and won.abstained
    # a name answers a "which country" question though no message says "country"
    country = ask(retriever, key, "Which country did Deepa go to at half term?")
    assert "Portugal" in country.answer and not country.abstained
