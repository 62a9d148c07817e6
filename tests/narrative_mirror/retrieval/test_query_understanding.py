from datetime import datetime

import numpy as np
import pytest

from narrative_mirror.retrieval.query_time import TimeWindow
from narrative_mirror.retrieval.query_understanding import QueryInfo, parse_query, question_type, time_mask

SPEAKERS = ["Emi", "elise"]
ALIASES = {"Kate": "Emi"}
START, END = datetime(2023, 12, 29, 22, 0), datetime(2024, 3, 10, 12, 0)


def parse(q: str) -> QueryInfo:
    return parse_query(
        q,
        speakers=SPEAKERS,
        aliases=ALIASES,
        known_entities=["colorado", "art basel", "ski"],
        chat_start=START,
        chat_end=END,
    )


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("When did Kate start skiing?", "when"),
        ("What date did Elise fly home?", "when"),
        ("Where was Elise on 31 Dec 2023?", "where"),
        ("Which city did Kate visit?", "where"),
        ("Who is Elise's sister?", "who"),
        ("Why did Kate quit?", "why"),
        ("How many times has Elise been to Turks and Caicos?", "how_many"),
        ("How long did Kate ski?", "how_many"),
        ("How does Kate feel about it?", "how"),
        ("What are Kate's hobbies?", "what"),
        ("Does Kate work full-time or part-time?", "yes_no"),
        ("Did Elise know where Kate lives?", "yes_no"),
        ("Tell me about the trip", "other"),
    ],
)
def test_question_type(question, kind):
    assert question_type(question) == kind


def test_persons_by_name_alias_and_possessive():
    assert parse("What are Kate's hobbies?").persons == ["Emi"]
    assert parse("Which cities have both, Kate and Elise, been to?").persons == ["Emi", "elise"]
    assert parse("Where does ELISE work?").persons == ["elise"]
    assert parse("Where do they ski?").persons == []
    # "Emily" is no alias: a name must match as a whole word
    assert parse("What did Emily say?").persons == []


def test_entities_longest_first_without_speaker_names():
    info = parse("Did Kate see Art Basel before skiing in Colorado?")
    assert info.entities == ["art basel", "colorado"]  # "ski" is no whole word of "skiing"


def test_explicit_dates():
    assert parse("What pasta did Kate make on 29 Dec 2023?").windows == [
        TimeWindow(datetime(2023, 12, 29), datetime(2023, 12, 30), "29 Dec 2023")
    ]
    assert parse("What happened on December 30, 2023?").windows == [
        TimeWindow(datetime(2023, 12, 30), datetime(2023, 12, 31), "December 30, 2023")
    ]
    assert parse("What happened on 30.12.2023 and 2024-01-05?").windows == [
        TimeWindow(datetime(2023, 12, 30), datetime(2023, 12, 31), "30.12.2023"),
        TimeWindow(datetime(2024, 1, 5), datetime(2024, 1, 6), "2024-01-05"),
    ]
    # no year: the year in which that day falls inside the chat
    assert parse("Where was Elise on Jan 3rd?").windows == [
        TimeWindow(datetime(2024, 1, 3), datetime(2024, 1, 4), "Jan 3rd")
    ]


def test_months_weeks_holidays_years_and_relations():
    assert parse("What did Kate cook in January?").windows == [
        TimeWindow(datetime(2024, 1, 1), datetime(2024, 2, 1), "in January")
    ]
    assert parse("What happened in the first week of February?").windows == [
        TimeWindow(datetime(2024, 2, 1), datetime(2024, 2, 8), "first week of February")
    ]
    assert parse("What happened in the last week of February?").windows == [
        TimeWindow(datetime(2024, 2, 23), datetime(2024, 3, 1), "last week of February")
    ]  # Feb 23-29 (leap year)
    assert parse("Where will they celebrate New Year 2025?").windows == [
        TimeWindow(datetime(2024, 12, 31), datetime(2025, 1, 2), "New Year 2025")
    ]
    assert parse("What did Elise do after New Year?").windows == [
        TimeWindow(datetime(2024, 1, 2), None, "after New Year")
    ]
    assert parse("What did Kate buy before Valentine's Day?").windows == [
        TimeWindow(None, datetime(2024, 2, 14), "before Valentine's Day")
    ]
    assert parse("Who did Kate meet in 2024?").windows == [
        TimeWindow(datetime(2024, 1, 1), datetime(2025, 1, 1), "in 2024")
    ]
    # a month spanning two chat years gives one window per year
    long_chat = parse_query(
        "What happened in March?", speakers=SPEAKERS, chat_start=datetime(2023, 3, 5), chat_end=datetime(2024, 3, 2)
    )
    assert [w.start for w in long_chat.windows] == [datetime(2023, 3, 1), datetime(2024, 3, 1)]


def test_may_the_verb_is_no_month_and_weekdays():
    assert parse("Why may Kate leave?").windows == []
    assert parse("What happened in May?").windows == [TimeWindow(datetime(2023, 5, 1), datetime(2023, 6, 1), "in May")]
    info = parse("What does Kate do on Mondays and Friday?")
    assert info.weekdays == [0, 4]
    assert info.windows == []
    assert info.has_time


def test_time_mask_windows_slack_and_weekdays():
    times = np.array(
        ["2023-12-29T23:00", "2023-12-30T00:30", "2024-01-01T10:00", "2024-01-08T09:00"], dtype="datetime64[us]"
    )
    info = parse("What pasta did Kate make on 29 Dec 2023?")
    assert time_mask(times, info).tolist() == [True, False, False, False]
    from datetime import timedelta

    assert time_mask(times, info, timedelta(hours=1)).tolist() == [True, True, False, False]
    assert time_mask(times, parse("What happened on Mondays?")).tolist() == [False, False, True, True]
    assert time_mask(times, parse("What are Kate's hobbies?")).tolist() == [True] * 4
    after = parse("What did Elise do after New Year?")
    assert time_mask(times, after).tolist() == [False, False, False, True]


def test_empty_question_is_an_error():
    with pytest.raises(ValueError, match="empty question"):
        parse("   ")


def test_to_dict_is_json_friendly():
    d = parse("Where was Kate on 31 Dec 2023?").to_dict()
    assert d == {
        "question_type": "where",
        "persons": ["Emi"],
        "entities": [],
        "weekdays": [],
        "windows": [{"start": "2023-12-31T00:00:00", "end": "2024-01-01T00:00:00", "expression": "31 Dec 2023"}],
    }
