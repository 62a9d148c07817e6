"""Query variants and multi_hop sub-questions, on hand-made questions with exact expected queries."""

import pytest

from narrative_mirror.agent.planner import facets_offline
from narrative_mirror.agent.rewrite import declarative, sub_queries, unique_queries


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        # each person, then nothing more: "Emi and Elise" is one side
        ("Which places have Emi and Elise both visited?", ["Emi places visited", "Elise places visited"]),
        # each side of a conjunction, with the person the question names
        ("Did Kevin go hiking and camping last week?", ["Kevin go hiking", "Kevin camping last week"]),
        # each item kind of a list question
        ("What sports, games and movies does Kevin like?", ["Kevin sports", "Kevin games", "Kevin movies does like"]),
        # each side of a comparison
        ("Is Kate more into painting or running?", ["Kate more into painting", "Kate running"]),
        # a question that does not split has no sub-questions
        ("Why did Paola quit her job?", []),
        ("What are Kate's hobbies?", []),
    ],
)
def test_sub_queries(question, expected):
    assert sub_queries(question, facets_offline(question), limit=4) == expected


def test_sub_queries_respect_the_limit_and_drop_repeats():
    question = "Does Emi prefer tea or coffee, and does Elise?"
    assert sub_queries(question, facets_offline(question), limit=2) == [
        "Emi prefer tea coffee",
        "Elise prefer tea coffee",
    ]
    assert unique_queries(["Kevin hiking", "hiking Kevin", "kevin  hikes", ""], ["Did Kevin go?"], 5) == [
        "Kevin hiking"
    ]


def test_declarative_drops_the_question_form():
    assert declarative("What kind of tomatoes did Ana buy?") == "tomatoes did Ana buy"
    assert declarative("Did Kevin go hiking?") == "Kevin go hiking"
