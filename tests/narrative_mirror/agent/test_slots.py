"""The slot reader on hand-made sentences: exact answers, relative dates resolved."""

from dataclasses import dataclass
from datetime import datetime

import pytest

from narrative_mirror.agent.dates import resolve_date
from narrative_mirror.agent.slots import answer_slot, phrase_span, required_slot_filled

FRIDAY = datetime(2024, 6, 7, 18, 0)  # Friday 7 June 2024


@pytest.mark.parametrize(
    "sentence, resolved",
    [
        ("The surgery is next Tuesday", "11 June 2024"),  # the example
        ("We met last Tuesday", "4 June 2024"),
        ("I'll call you on Monday", "10 June 2024"),  # a plan: the coming Monday
        ("We went out on Monday", "3 June 2024"),  # past: the one before
        ("I got back yesterday", "6 June 2024"),
        ("See you tomorrow!", "8 June 2024"),
        ("It was 3 days ago", "4 June 2024"),
        ("We fly on 30 December", "30 December 2023"),  # no year: the one nearest to when it was said
        ("My birthday is July 14th", "14 July 2024"),
        ("I started skiing in 2013", "2013"),
        ("Back in March we moved", "March 2024"),
        ("I was in Mexico in spring 2023", "spring 2023"),
        ("Christmas was quiet", "25 December 2023"),
        ("Next month is busy", "July 2024"),
        ("Last week was hard", "the week before 7 June 2024"),
        ("2024-01-05 was the day", "5 January 2024"),
        ("Nothing about time here", None),
    ],
)
def test_resolve_date(sentence, resolved):
    assert resolve_date(sentence, FRIDAY) == resolved


@pytest.mark.parametrize(
    "sentence, resolved",
    [
        ("The operation is confirmed for next Tuesday", "11 June 2024"),  # next week's, not tomorrow
        ("The operation is this coming Tuesday", "4 June 2024"),
        ("I'll see him on Tuesday", "4 June 2024"),
        ("Next Sunday is the regatta", "16 June 2024"),
    ],
)
def test_next_weekday_is_that_day_of_next_week(sentence, resolved):
    assert resolve_date(sentence, datetime(2024, 6, 3, 19, 0)) == resolved  # Monday 3 June 2024


@dataclass
class Msg:
    local_id: str
    speaker: str
    text: str
    timestamp: datetime


def test_answer_slot_reads_each_kind_of_question():
    evidence = [
        Msg("D1:1", "Ana", "Hi! How are you?", FRIDAY),
        Msg("D1:2", "Ben", "I visited my aunt in San Diego. We stayed for 5 days and ate ham and peas twice.", FRIDAY),
    ]
    assert answer_slot("Where did Ben visit his aunt?", "where", evidence).text == "San Diego"
    assert answer_slot("How many days did Ben stay?", "how_many", evidence).text == "5 days"
    assert answer_slot("How many times did Ben eat ham?", "how_many", evidence).text == "twice"
    assert answer_slot("When did Ben visit his aunt?", "when", evidence).text == "7 June 2024"  # the message's date
    dinner = [Msg("D3:1", "Ben", "I visited my aunt. We had ham and peas for dinner.", FRIDAY)]
    found = answer_slot("What did Ben have for dinner?", "what", dinner)  # the sentence about dinner
    assert (found.text, found.local_id, found.kind) == ("ham and peas", "D3:1", "phrase")
    assert (
        answer_slot("Did Ben enjoy it?", "yes_no", [Msg("D2:1", "Ben", "It was not fun at all.", FRIDAY)]).text == "No"
    )


def test_a_place_in_lower_case_is_the_fallback_of_a_where_question():
    river = [Msg("D1:6", "Ben", "Along the river path near the old mill, most mornings.", FRIDAY)]
    assert answer_slot("Where does Ben run?", "where", river).text == "Along the river path near the old mill"
    # a capitalized place in a later message is preferred to a lower-case one in the first
    both = river + [Msg("D2:1", "Ben", "Tomorrow I run in Lisbon.", FRIDAY)]
    assert answer_slot("Where does Ben run?", "where", both).text == "Lisbon"
    # a time, a measure or a manner is not a place
    for text in ("First time in a year without pain", "We won by a mile", "I'm on the way"):
        assert answer_slot("Where was it?", "where", [Msg("D3:1", "Ana", text, FRIDAY)]) is None, text


def test_a_message_saying_where_the_asked_thing_happens_beats_a_place_named_in_passing():
    """ "Meet at the station at 7:45 then" (best first) says where they meet; "Newcastle", in the
    message about the train, names a place in passing."""
    evidence = [
        Msg("2014", "Greta", "Meet at the station at 7:45 then", FRIDAY),
        Msg("2012", "Yusuf", "Train from Newcastle at 07:45 then?", FRIDAY),
    ]
    found = answer_slot("Where do they meet before the train?", "where", evidence)
    assert (found.text, found.local_id, found.kind) == ("at the station", "2014", "place")
    assert answer_slot("Where do they meet before the train?", "where", evidence[::-1]).text == "Newcastle"


def test_phrase_span_keeps_the_words_the_question_lacks():
    assert phrase_span("I made pasta with ham and peas", "What kind of pasta did Kate make?") == "ham and peas"
    assert phrase_span("Kate made pasta", "What kind of pasta did Kate make?") is None


@pytest.mark.parametrize(
    "intent, answer, filled",
    [
        ("when", "11 June 2024", True),
        ("when", "at the hospital", False),
        ("how_many", "2 days", True),
        ("how_many", "forty loaves", True),
        ("how_many", "a lot", False),
        ("where", "Trondheim", True),
        ("where", "at the old mill", True),
        ("where", "in a year", False),
        ("who", "her mother", False),
        ("who", "Tue", False),  # a day names no one
        ("who", "Niamh", True),
        ("where", "Friday", False),
        ("what", "ham", True),
    ],
)
def test_required_slot(intent, answer, filled):
    assert required_slot_filled(intent, answer) is filled


@pytest.mark.parametrize(
    "sentence, said, resolved",
    [
        ("I went over on my ankle at football last night.", datetime(2024, 4, 4, 12, 41), "3 April 2024"),
        ("Lisbon half marathon, Sunday the 19th.", datetime(2024, 5, 2, 20, 10), "19 May 2024"),  # not 28 April
        ("NO WAY. Friday the 12th?", datetime(2024, 4, 7, 17, 20), "12 April 2024"),
        ("Saturday the 22nd. I've got less than three weeks", datetime(2024, 6, 3, 18, 40), "22 June 2024"),
        # weeks and years counted by a speaker are rounded: the amount as written, from the day it was said
        ("Ask me again in two weeks.", datetime(2024, 5, 2, 20, 10), "two weeks after 2 May 2024"),
        (
            "One trip was a visit to Kyoto a couple of years ago.",
            datetime(2024, 1, 11, 9),
            "a couple of years before 11 January 2024",
        ),
    ],
)
def test_relative_dates_of_the_demo_chats(sentence, said, resolved):
    assert resolve_date(sentence, said) == resolved


@pytest.mark.parametrize(
    "sentence, resolved",
    [
        ("Friday the 20th to Sunday the 22nd", "20 March 2026"),  # 20 February is a Friday too, but gone
        ("Let's do Tuesday the 3rd", "3 March 2026"),  # a day of the month said that day: that day
        ("Saturday the 5th works for me", "5 September 2026"),  # the next 5th on a Saturday
        ("Can you pay me back by the 15th?", "15 March 2026"),
        ("The deposit was paid on the 1st", "1 March 2026"),  # told of as past: the one before
        ("It's on the 1st floor", None),
    ],
)
def test_a_day_of_the_month_without_its_month_is_the_next_such_day(sentence, resolved):
    assert resolve_date(sentence, datetime(2026, 3, 2, 19, 7)) == resolved  # Monday 2 March 2026


@pytest.mark.parametrize(
    "sentence, said, resolved",
    [
        (
            "I had bad stomach pains like 2 weeks ago and thought I was gonna die",
            datetime(2024, 1, 6, 9),
            "2 weeks before 6 January 2024",
        ),
        (
            "when I got covid about a year ago it really kicked my butt",
            datetime(2023, 12, 31, 9),
            "a year before 31 December 2023",
        ),
        ("I had ravioli a month ago", datetime(2024, 1, 7, 9), "December 2023"),  # a month: the month it names
        (
            "My semester at Stanford will start in a couple of weeks.",
            datetime(2024, 1, 5, 9),
            "a couple of weeks after 5 January 2024",
        ),
        ("Every year I carve pumpkins.", FRIDAY, "Every year"),  # a habit
        ("I have played chess for some years when I was in high school.", FRIDAY, "when I was in high school"),
        ("I used to have small ones as a kid when we had our aquarium", FRIDAY, "as a kid"),
    ],
)
def test_counted_weeks_and_years_habits_and_times_of_life(sentence, said, resolved):
    assert resolve_date(sentence, said) == resolved
    assert required_slot_filled("when", resolved)


def test_a_habit_answers_when_does_not_when_did():
    pumpkins = [Msg("D10:36", "Elise", "Every year I carve pumpkins. That's a must for my Halloween decor.", FRIDAY)]
    assert answer_slot("When does Elise carve pumpkins?", "when", pumpkins).text == "Every year"
    assert answer_slot("When did Elise carve pumpkins?", "when", pumpkins).text == "31 October 2024"  # not the habit


def test_the_date_is_read_in_the_sentence_that_shares_the_question_s_words():
    # "planning ... going skiing" is the question's "plan to go skiing": its sentence, not the one with "go" and "to"
    skiing = [
        Msg(
            "D9:19",
            "Elise",
            "Actually I am planning on going skiing next week. It is one of my favorite winter "
            "activities, and I haven't been able to go for a couple of years.",
            FRIDAY,
        )
    ]
    assert answer_slot("When does Elise plan to go skiing?", "when", skiing).text == "the week after 7 June 2024"


def test_a_lower_case_place_in_the_evidence_comes_before_a_name_the_chat_uses():
    """ "Where does Ines run?": "16k along the river", not "Done" (a chat entity in a later message)."""
    evidence = [
        Msg("D1:8", "Ines", "Good! Did my longest run yet on Sunday, 16k along the river", FRIDAY),
        Msg("D6:4", "Ines", "Two months ago I couldn't run 10k and now I've done a half", FRIDAY),
    ]
    assert answer_slot("Where does Ines run?", "where", evidence, entities=["done"]).text == "along the river"
    assert answer_slot("Where does Ines run?", "where", evidence[1:], entities=["done"]).text == "Done"


@pytest.mark.parametrize(
    "question, intent, text, answer",
    [
        (
            "What job did Mara apply for?",
            "what",
            "Other news: the branch coordinator job at the library got posted today",
            "branch coordinator",
        ),
        (
            "What job did Mara get?",
            "what",
            "The regional manager called this afternoon. I start as branch coordinator on the 1st of May",
            "branch coordinator",
        ),
        (
            "What colours did Sam paint Wren?",
            "what",
            "Dark blue with a white stripe. Very classy",
            "Dark blue with a white stripe",
        ),
        ("What did Zebulon name his parrots?", "what", "He named the parrots Quasar and Nimbus.", "Quasar and Nimbus"),
        (
            "Who helped Mara build the raised beds?",
            "who",
            "Mr. Okafor did all the measuring and Jonah and I did the heavy lifting. Took us the whole of Saturday",
            "Mr. Okafor and Jonah",
        ),
    ],
)
def test_the_slot_is_the_thing_asked_for_as_written(question, intent, text, answer):
    assert answer_slot(question, intent, [Msg("D1:1", "Mara", text, FRIDAY)]).text == answer


def test_a_colour_role_or_name_question_without_one_in_the_evidence_gets_no_fragment():
    """ "What colours did Sam paint Wren?" over "I spent yesterday evening scraping the old paint off
    Wren" was "spent yesterday evening scraping the old": now nothing (the verifier abstains)."""
    scraping = [
        Msg("D2:3", "Sam", "I spent yesterday evening scraping the old paint off Wren. My arms are dead", FRIDAY)
    ]
    assert answer_slot("What colours did Sam paint Wren?", "what", scraping) is None
    assert answer_slot("What job did Sam apply for?", "what", scraping) is None


@pytest.mark.parametrize(
    "question, text, answer",
    [
        (
            "How long has Elise been playing tennis?",
            "Yes, tennis is one of my passions and I have been playing for many many years.",
            "for many many years",
        ),
        (
            "How long has Paola lived in New York?",
            "I have been living in New York since September, so now it is easier.",
            "since September",
        ),
        (
            "How often does she get her nails done?",
            "Oh she never goes without nails, every 2 weeks she has a new pair on",
            "every 2 weeks",
        ),
        (
            "For how long does Nebraas have to rest?",
            "He said I hurt my lower back and I need to rest for a month!!",
            "for a month",
        ),
        (
            "For how long did his family ask her to work at the bakery?",
            "she wants to work at the bakery which we wanted her to anyways for years",
            "for years",
        ),
        # "since he ..." is no time: the count of the next sentence answers
        ("For how long did Vanessa date him?", "It got weird since he moved in. I think about 3 years?", "3 years"),
    ],
)
def test_how_long_and_how_often_are_read_as_written(question, text, answer):
    found = answer_slot(question, "how_many", [Msg("D1:1", "Ana", text, FRIDAY)])
    assert found.text == answer and required_slot_filled("how_many", found.text)


def test_a_question_about_a_kind_of_named_thing_lists_the_names_of_the_sentence():
    trip = [Msg("D1:1", "Ana", "We flew from Miami to Los Angeles and then drove to San Diego.", FRIDAY)]
    found = answer_slot("Which cities did Ana visit?", "what", trip)
    assert (found.text, found.kind) == ("Miami, Los Angeles, San Diego", "names")


def test_a_count_or_amount_is_never_a_day_or_a_clock_time():

    # "How much was the race entry fee?" was answered "8 November" and "30" (of "8:30")
    assert [required_slot_filled("how_many", a) for a in ("8 November", "May 3", "8:30", "7pm")] == [False] * 4
    assert [required_slot_filled("how_many", a) for a in ("£12", "3 days", "12 teams", "since September 2020")] == [
        True
    ] * 4


def test_a_price_asked_is_answered_by_money_never_a_count_of_things_or_a_day():
    order = "Order confirmed: 120 beef burgers, 80 sausages, collecting Saturday"
    assert (
        answer_slot("How much did the burgers and sausages cost?", "how_many", [Msg("m1", "Mark", order, FRIDAY)])
        is None
    )
    assert (
        answer_slot("How many sausages did we order?", "how_many", [Msg("m1", "Mark", order, FRIDAY)]).text
        == "80 sausages"
    )
    paid = "Butcher came to £45 deposit, rest on the day"
    assert (
        answer_slot("How much did the burgers cost?", "how_many", [Msg("m2", "Mark", paid, FRIDAY)]).text
        == "45 deposit"
    )
    # "How much are tickets?" asks a price; "20 Feb" is a day, no amount
    assert not required_slot_filled("how_many", "20 Feb")
    sales = "Thu 20 Feb 7.30pm: 41 sold"
    assert (
        answer_slot("How much are tickets for the show?", "how_many", [Msg("m3", "Box office", sales, FRIDAY)]) is None
    )
    # time spent is no money
    drive = "The drive is about 90 minutes without traffic"
    assert (
        answer_slot("How much time does he spend on the road?", "how_many", [Msg("m4", "Mo", drive, FRIDAY)]).text
        == "90 minutes"
    )


def test_a_thing_ruled_out_is_a_no():
    from narrative_mirror.agent.exchange_values import NEGATIVE

    ruled_out = "Checked with our insurer - microwaves are still excluded, and anything gas"
    assert answer_slot("Can people bring microwaves?", "yes_no", [Msg("m1", "Mags", ruled_out, FRIDAY)]).text == "No"
    assert NEGATIVE.search(ruled_out) and NEGATIVE.search("dogs are banned from the hall")
    assert not NEGATIVE.search("everyone's included, kids too")
