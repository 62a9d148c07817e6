"""An open "what" question's answer read from hand-made sentences: the asked noun made specific,
or the object of the question's verb, exactly as written."""

from datetime import datetime

import pytest

from narrative_mirror.agent.slot_phrases import asked, read
from narrative_mirror.agent.slots import answer_slot
from narrative_mirror.layers.text import tokens
from narrative_mirror.retrieval.records import ChatMessage

JAN = datetime(2024, 1, 21, 20, 0)


def _read(question: str, sentence: str) -> str | None:
    return read(sentence, question, {t.lower() for t in tokens(question)})


@pytest.mark.parametrize(
    "question, noun, verb",
    [
        ("What TV show was Kate watching shortly before 7 Jan 2024?", ["tv", "show"], "watching"),
        ("What did Elise buy on 7 Jan 2024?", [], "buy"),
        ("What did Paola make for her mom's birthday?", [], "make"),
        ("What is Paola planning to do with her friends?", [], None),  # no verb with an object of its own
        ("What games are both Kate and Elise interested in?", ["games"], "interested"),
    ],
)
def test_the_asked_noun_and_the_question_verb(question, noun, verb):
    assert asked(question) == (noun, verb)


@pytest.mark.parametrize(
    "question, sentence, answer",
    [
        # the asked noun with the words before it that make it specific
        (
            "What class did Kevin have on 21.01.2024?",
            "Today I had school and I had a very interesting economics class where we were discussing fiscal policy.",
            "economics class",
        ),
        (
            "Which class did Emi attend for the first time?",
            "Today, I attended my first Pilates class, which was fun.",
            "Pilates class",
        ),  # "first" makes nothing specific
        (
            "Which meeting did Paola have in the evening?",
            "I'm also excited about a virtual book club meeting I have later.",
            "virtual book club meeting",
        ),
        # what follows the noun: "a recipe for ...", a quoted title
        ("Which recipe did Paola try?", "I've been trying out a new recipe for homemade pizza.", "homemade pizza"),
        (
            "What sitcom did Emi start rewatching?",
            'Today I started re-watching one of my favorite sitcoms "Friends".',
            "Friends",
        ),
        # the object of the question's verb, to the first boundary word or punctuation
        (
            "What did Elise buy on 7 Jan 2024?",
            "Now I'm at Walmart buying water and breakfast bars. What about you?",
            "water and breakfast bars",
        ),
        (
            "What sport did Kevin play with his friends?",
            "I just finished playing some volleyball with my friends!",
            "volleyball",
        ),
        (
            "What did Paola make for her mom's birthday?",
            "For my mom's birthday last Friday we made macarons.",
            "macarons",
        ),
        (
            "What did Elise play on 5 Jan 2024?",
            "Today we are gonna play a game of basketball in this new field!",
            "game of basketball",
        ),
    ],
)
def test_an_open_answer_is_the_specific_noun_or_the_verb_object(question, sentence, answer):
    assert _read(question, sentence) == answer


@pytest.mark.parametrize(
    "question, sentence",
    [
        ("What kind of pasta did Kate make?", "Today we're making pasta."),  # the question's own verb is not the kind
        (
            "What football match did Kevin watch in 2017?",
            "I've watched many football matches.",
        ),  # only the question's words
        ("What did Elise buy?", "We went to the beach."),  # neither the noun nor the verb
    ],
)
def test_nothing_when_the_sentence_adds_nothing(question, sentence):
    assert _read(question, sentence) is None


def test_the_open_answer_of_the_slot_reader_uses_it():
    evidence = [
        ChatMessage(
            "D7:24",
            "c/D7:24",
            1,
            1,
            "elise",
            "So far I've read a chapter of a book. Now I'm at Walmart buying water and breakfast bars.",
            JAN,
        )
    ]
    found = answer_slot("What did Elise buy on 7 Jan 2024?", "what", evidence)
    assert (found.text, found.kind, found.local_id) == ("water and breakfast bars", "phrase", "D7:24")
