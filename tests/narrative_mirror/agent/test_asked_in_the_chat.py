"""Questions the chat itself asked, shares of a cost and who's-questions, asked offline through the
whole agent over a real LanceDB with the real embedder, of a WhatsApp export written for these
tests (a climbing weekend): a yes/no question put to the chat and never answered is not answered
by the message asking it; "How much do I owe Priya?" asks for a share, read from the person owed
even where the search did not select it; "Who's driving?" has a verb; a writer whose name has no
capital ("sunita.k") is a person."""

from __future__ import annotations

import pytest
from index_frames import index_whatsapp_text

from narrative_mirror.agent.conversation import question_kind
from narrative_mirror.query import ask

CLIMBING_WEEKEND = """\
14/05/2026, 18:00 - Priya: Peak weekend is on! Barn booked in Hathersage for the 2 nights
14/05/2026, 18:05 - Rhys: Does anyone know if the Hollin Bank car park takes cards now or is it still coins only?
14/05/2026, 18:20 - Nadia: Kit list: rack, 2 ropes, chalk, headtorches, guidebook
14/05/2026, 18:30 - Callum: Leaving at 7:10, want to get parked at Hollin Bank before the crowds
14/05/2026, 18:40 - Lou: Is the café at the crag open on bank holidays?
14/05/2026, 18:45 - Callum: yes, till 4, they do a great bacon roll
15/05/2026, 20:00 - Lou: my knee's gone, I can't drive on Saturday, so sorry
15/05/2026, 20:10 - sunita.k: since Lou's out I'll drive the second car. Dan you can come with me
17/05/2026, 20:15 - Priya: Money time! Barn £240 + £25 cleaning = £265, split between the 5 of us that's £53 each
17/05/2026, 20:30 - Ify: Petrol came to £31.50, so £10.50 each for me, Sof and Rhys
"""


@pytest.fixture(scope="module")
def climbing_weekend(tmp_path_factory, embedder):
    return index_whatsapp_text(tmp_path_factory.mktemp("climbing"), "Peak weekend", CLIMBING_WEEKEND, embedder)


def test_a_yes_no_question_the_chat_asked_and_never_answered_is_not_answered(climbing_weekend):
    retriever, key, messages = climbing_weekend
    answer = ask(retriever, key, "Does the Hollin Bank car park take cards?")
    assert answer.abstained, answer.answer  # not "Yes" from the message asking it
    assert any(u.startswith("Rhys asked this on 14 May 2026") for u in answer.unknowns), answer.unknowns
    # the same kind of question, answered by a reply giving the verdict
    answered = ask(retriever, key, "Is the café at the crag open on bank holidays?")
    assert not answered.abstained and answered.answer.startswith("Yes"), answered.answer


def test_what_i_owe_someone_is_a_share_read_from_the_person_owed(climbing_weekend):
    retriever, key, _ = climbing_weekend
    assert question_kind("How much do I owe Priya for the barn?", "how_many") == "each"
    assert question_kind("What do Sof and Rhys owe Ify?", "what") == "each"
    assert question_kind("How much did the barn cost?", "how_many") == "amount"
    answer = ask(retriever, key, "How much do I owe Priya for the accommodation?")
    # "£53 each", not the total nor Ify's petrol share that follows it
    assert answer.answer.startswith("£53 each"), answer.answer
    petrol = ask(retriever, key, "How much petrol money do Sof and Rhys owe Ify?")
    assert petrol.answer.startswith("£10.50 each"), petrol.answer


def test_whos_asks_for_the_doer_of_its_verb_and_a_lowercase_writer_is_a_person(climbing_weekend):
    retriever, key, _ = climbing_weekend
    answer = ask(retriever, key, "Who's driving the second car now Lou isn't coming?")
    # the writer taking it on, not Dan who is offered a seat; "sunita.k" has no capital and is a person
    assert answer.answer == "sunita.k" and not answer.abstained, answer.answer
