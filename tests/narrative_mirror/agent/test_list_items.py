"""Answers of the fourth round on hand-made evidence: a question asking for shows, films or books
is answered with the titles the evidence writes in quotes, a list answer's phrases keep their own
words only, and a "what" question that names no one thing asks for several."""

from datetime import datetime

import pytest

from narrative_mirror.agent.answer import Claim, EvidenceMessage, offline_answer, verify
from narrative_mirror.agent.grading import FacetMatch
from narrative_mirror.agent.list_items import asks_for_titles, titles, words_in_order
from narrative_mirror.retrieval.records import ChatMessage


def message(local_id, position, text, speaker="Emi", terms=("show",)):
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
    )


@pytest.mark.parametrize(
    "question, wanted",
    [
        ("What tv shows did Emi watch?", True),
        ("What movies or tv shows did Paola recommend to Emi?", True),
        ("Which books does Paola like?", True),
        ("What kinds of films did Nebraas watch?", True),
        ("What are Paola's favorite genres?", False),  # what they are about, not titles
        ("What sports does Kevin play?", False),
    ],
)
def test_asks_for_titles(question, wanted):
    assert asks_for_titles(question) is wanted


def test_titles_are_the_quoted_names_each_once_and_no_quoted_sentence():
    text = 'I loved "Friends" and “The Office”. She said "see you soon!" and then "Friends" again.'
    assert titles(text) == ["Friends", "The Office"]


def test_a_title_keeps_the_author_named_after_it_and_is_verified_word_by_word():
    text = 'Lately I read "The Invisible Life of Addie LaRue" by V.E. Schwab. And "Becoming" by Michelle Obama!'
    assert titles(text) == ["The Invisible Life of Addie LaRue by V.E. Schwab", "Becoming by Michelle Obama"]
    evidence = [message("D2:14", 14, text, terms=("book",))]
    answer, claims, _ = offline_answer("What books did Emi read?", "what", evidence)
    assert answer == "The Invisible Life of Addie LaRue by V.E. Schwab, Becoming by Michelle Obama"
    assert len(verify(claims, {"D2:14": evidence[0]}, "what", {"D2:14": 0.5})[0]) == 1


def test_a_question_asking_for_shows_is_answered_with_the_quoted_titles():
    evidence = [
        message("D1:2", 2, 'Lately I have been re-watching "Friends" and "The Office", so good.'),
        message("D1:5", 5, "I watch a lot of tv on weekends."),  # no title: no claim
        message("D1:7", 7, 'Also "Sherlock"! And "Friends" of course.'),
    ]  # "Friends" said before
    text, claims, unknowns = offline_answer("What tv shows did Emi watch?", "what", evidence)
    assert text == "Friends, The Office; Sherlock"
    assert [(c.text, c.ids, c.kind) for c in claims] == [
        ("Friends, The Office", ["D1:2"], "title"),
        ("Sherlock", ["D1:7"], "title"),
    ]
    assert unknowns == []
    verified, problems = verify(claims, {e.message.local_id: e for e in evidence}, "what", {"D1:2": 0.5, "D1:7": 0.5})
    assert (len(verified), problems) == (2, [])


def test_without_quoted_titles_the_phrases_answer():
    evidence = [message("D1:2", 2, "I watch cooking shows with my mom every evening.")]
    text, claims, _ = offline_answer("What tv shows did Emi watch?", "what", evidence)
    assert (text, claims[0].kind) == ("cooking shows", "phrase")


def test_a_phrase_kept_to_its_own_words_is_verified_word_by_word_in_order():
    evidence = {"D1:1": message("D1:1", 1, "Honestly I drink lemon tea every morning.", terms=("drink",))}
    assert words_in_order("lemon tea morning", "Honestly I drink lemon tea every morning.")
    assert not words_in_order("morning lemon tea", "Honestly I drink lemon tea every morning.")
    kept, _ = verify([Claim("lemon tea morning", ["D1:1"], kind="title")], evidence, "what", {"D1:1": 0.5})
    wrong, problems = verify([Claim("green tea morning", ["D1:1"], kind="title")], evidence, "what", {"D1:1": 0.5})
    assert (len(kept), wrong, problems) == (1, [], ["Unverified (not what ['D1:1'] says): green tea morning"])


def test_a_question_naming_no_one_thing_gathers_a_phrase_from_each_message():
    evidence = [
        message("D2:1", 1, "I made spicy shrimp scampi tonight.", speaker="Paola", terms=("cook",)),
        message("D2:2", 2, "Veggie stirfry is my go-to dinner.", speaker="Paola", terms=("cook",)),
    ]
    # "food" is no plural, but the question names no one dish: what she cooks
    text, claims, _ = offline_answer("What food does Paola cook?", "what", evidence)
    assert (text, [c.ids for c in claims]) == (
        "spicy shrimp scampi tonight; Veggie stirfry is my go-to dinner",
        [["D2:1"], ["D2:2"]],
    )
    # one event, on a day: the best phrase only
    assert (
        offline_answer("What food did Paola cook on 2 January?", "what", evidence)[0] == "spicy shrimp scampi tonight"
    )


def test_a_where_question_about_the_past_gathers_every_place_and_one_about_a_habit_one():
    evidence = [
        message(
            "D2:5", 5, "Today I think im going to the waterpark with my family!", speaker="Kevin", terms=("family",)
        ),
        message("D5:14", 14, "We went to a nice small restaurant that felt warm.", speaker="Kevin", terms=("family",)),
    ]
    text, claims, _ = offline_answer("Where did Kevin go with his family?", "where", evidence)
    assert (text, [c.ids for c in claims]) == (
        "to the waterpark; to a nice small restaurant that felt warm",
        [["D2:5"], ["D5:14"]],
    )
    assert offline_answer("Where does Kevin go with his family?", "where", evidence)[0] == "to the waterpark"
    assert (
        offline_answer("Where did Kevin go with his family on 5 January?", "where", evidence)[0] == "to the waterpark"
    )


def test_a_question_asking_for_one_title_is_answered_with_the_first_quoted_one():
    evidence = [
        message(
            "D4:6",
            6,
            'I am in Paris this week. Reading "Where the Crawdads Sing" by Delia Owens and '
            'then "Crazy, Stupid, Love" tonight.',
            terms=("book",),
        ),
        message("D4:9", 9, 'Also "Becoming" later.', terms=("book",)),
    ]
    text, claims, _ = offline_answer("What book is Emi reading on 21.01.2024?", "what", evidence)
    assert (text, claims[0].ids, claims[0].kind) == ("Where the Crawdads Sing by Delia Owens", ["D4:6"], "title")
    assert len(verify(claims, {"D4:6": evidence[0]}, "what", {"D4:6": 0.5})[0]) == 1
