"""Answers of the second round on hand-made evidence: a question asking for several things is
answered from each of the best messages, a season named without a year takes its year from the
sentence's tense."""

from datetime import datetime

import pytest

from narrative_mirror.agent.answer import LIST_MESSAGES, NO_ANSWER, Claim, EvidenceMessage, offline_answer, verify
from narrative_mirror.agent.dates import resolve_date
from narrative_mirror.agent.grading import FacetMatch
from narrative_mirror.agent.slot_nouns import asks_for_list
from narrative_mirror.retrieval.records import ChatMessage


def message(local_id, position, text, speaker="Nico", continues=None, terms=("drink",)):
    return EvidenceMessage(
        ChatMessage(
            local_id=local_id,
            message_id=f"c/{local_id}",
            position=position,
            session=1,
            speaker=speaker,
            text=text,
            timestamp=datetime(2024, 1, 1 + position),
        ),
        grade=0.9,
        match=FacetMatch(frozenset(terms), 1.0, True),
        continues=continues,
    )


@pytest.mark.parametrize(
    "question, wanted",
    [
        ("What drinks does Nicolas like?", True),
        ("What are Emi's hobbies?", True),
        ("What tv shows did Emi watch?", True),
        ("What types of sports did Kevin do?", True),
        ("What health problems did Nicolas have?", True),
        ("What food does Nicolas prefer?", True),  # names no one thing: what he eats
        ("What is Paola learning?", True),
        ("Which book did Paola start on 21.01.2024?", False),  # one event: pinned to a day
        ("What sport did Kevin play with his friends yesterday?", False),
        ("What kind of pasta did Kate make?", False),
        ("What kind of tomatoes is Ana growing?", False),  # one kind
        ("What kinds of tomatoes is Ana growing?", True),
    ],
)
def test_asks_for_list(question, wanted):
    assert asks_for_list(question, "what") is wanted
    assert asks_for_list(question, "when") is False


def test_a_list_question_gathers_one_phrase_from_each_of_the_best_messages():
    evidence = [
        message("D1:1", 1, "Iced bubble tea is my favourite"),
        message("D1:2", 2, "Honestly I drink lemon tea every morning."),
        message("D1:3", 3, "Inca Cola reminds me of home"),
        message("D1:4", 4, "Iced bubble tea is my favourite"),  # said again: once in the answer
        message("D1:5", 5, "Cold brew coffee too"),
        message("D1:6", 6, "Fresh mango smoothies"),
    ]  # past the best LIST_MESSAGES
    assert LIST_MESSAGES == 4
    text, claims, unknowns = offline_answer("What drinks does Nicolas like?", "what", evidence)
    assert text == "Iced bubble tea is my favourite; lemon tea every morning; Inca Cola reminds me of home"
    assert [c.ids for c in claims] == [["D1:1"], ["D1:2"], ["D1:3"]]
    assert unknowns == []
    # one thing asked for (one event, on a day): the best phrase only (the sentence sharing "drink" with the question)
    assert offline_answer("What drink did Nicolas have on 4 January?", "what", evidence)[0] == "lemon tea every morning"


def test_a_list_question_reads_a_continuation_with_its_message():
    evidence = [
        message("D1:1", 1, "My cousin keeps pets."),
        message("D1:2", 2, "He named the parrots Quasar and Nimbus.", continues="D1:1"),
    ]
    text, claims, _ = offline_answer("What names did his cousin choose for the parrots?", "what", evidence)
    assert (text, [c.ids for c in claims]) == ("Quasar and Nimbus", [["D1:2"]])


@pytest.mark.parametrize(
    "sentence, resolved",
    [
        ("My friend was in Santorini in the summer", "summer 2023"),  # past, said in January: the last one
        ("We plan to visit Greece in the summer", "summer 2024"),  # a plan: the next one
        ("The slopes are great this winter", "winter 2023"),  # said during it: the year it began
        ("I was in Mexico in spring 2023", "spring 2023"),
    ],
)
def test_a_season_without_a_year_takes_it_from_the_tense(sentence, resolved):
    assert resolve_date(sentence, datetime(2024, 1, 10)) == resolved


def test_a_question_offering_two_answers_is_answered_with_the_one_the_evidence_names():
    question = "Does Nebraas work full-time or part-time in a bubble tea shop?"
    evidence = [message("D2:1", 1, "Work was slow today. I'm only Part-time at the tea shop, so it's fine.")]
    text, claims, _ = offline_answer(question, "yes_no", evidence)
    assert (text, claims[0].ids) == ("Part-time", ["D2:1"])
    # neither named: no "Yes" (which answers nothing), the chat does not tell
    text, claims, unknowns = offline_answer(question, "yes_no", [message("D2:1", 1, "Work was slow today.")])
    assert (text, claims) == (NO_ANSWER, [])
    # a plain yes/no question still reads yes or no
    assert offline_answer("Does Nebraas work in a bubble tea shop?", "yes_no", evidence)[0] == "Yes"


def test_a_sentence_that_asks_is_not_the_answer():
    evidence = [
        message("D3:1", 1, "Do you like snacks these days?", speaker="Vanessa"),
        message("D3:2", 2, "Pistachios with tea, always."),
    ]
    assert offline_answer("What snack does Nicolas like with tea?", "what", evidence)[0] == "Pistachios"
    text, claims, _ = offline_answer("What snacks does Nicolas like with tea?", "what", evidence)
    assert (text, [c.ids for c in claims]) == ("Pistachios", [["D3:2"]])


def test_a_plan_in_the_question_is_its_form_not_its_topic():
    """ "Where is Paola planning to go?": the message naming the place need not say "plan"."""
    # the question's terms the message holds: none ("planning" is not in it)
    evidence = {"D4:1": message("D4:1", 1, "Tomorrow we go to Walt Disney World with the kids!", terms=())}
    claim = Claim("Walt Disney World", ["D4:1"], kind="place")
    assert verify([claim], evidence, "where", {"D4:1": 0.4}, topic=["planning"]) == ([claim], [])
    assert verify([claim], evidence, "where", {"D4:1": 0.4}, topic=["holiday"])[1] == [
        "Unverified (no evidence message mentions holiday): Walt Disney World"
    ]
