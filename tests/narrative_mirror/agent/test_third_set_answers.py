"""Answers from the own_chats_3 question set's chats (tests/answer_sets/own_chats_3: a Messenger and a
Signal export written for it, read by the export readers and built into a real LanceDB with the real
embedder), asked offline: a person named by first name where the app writes full names, someone
who drops out ("still coming?", "why can't they?"), a question answered by its reply, amounts
written with their currency, and a cost never said."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest
from index_frames import index_export_folder

from narrative_mirror.agent.answer import NO_ANSWER
from narrative_mirror.agent.exchange_values import NEGATIVE, amounts
from narrative_mirror.agent.slots import answer_slot
from narrative_mirror.query import ask
from narrative_mirror.retrieval.records import ChatMessage

SET = Path(__file__).resolve().parents[2] / "answer_sets" / "own_chats_3"
WHITBY, MOVE = "messenger_whitby_cousins", "signal_moving_flat"


@pytest.fixture(scope="module")
def chats(tmp_path_factory, embedder):
    """(retriever, {chat key: messages}) of the set's two exports."""
    retriever, frames = index_export_folder(SET / "chats", tmp_path_factory.mktemp("third_set") / "lancedb", embedder)
    assert sorted(frames) == sorted([WHITBY, MOVE])
    return retriever, frames


def said(frames, key: str, start: str) -> str:
    """The id of the message of chat ``key`` whose text starts with ``start``."""
    rows = frames[key].filter(pl.col("text").str.starts_with(start))
    assert rows.height == 1, start
    return rows["local_id"][0]


@pytest.mark.slow
def test_someone_who_drops_out_is_no_longer_coming_and_says_why(chats):
    retriever, frames = chats
    # Messenger writes "Dev Nair"; the question says "Dev".
    dev = ask(retriever, WHITBY, "Is Dev still coming to Whitby?")
    assert dev.answer.startswith("No") and dev.claims[0].ids[0] == said(frames, WHITBY, "Bad news guys")
    # "Sorry Noor, I'm out. My sister's wedding got moved to Saturday": the withdrawal is the verdict.
    sam = ask(retriever, MOVE, "Is Sam still helping on Saturday?")
    assert sam.answer.startswith("No") and sam.claims[0].ids[0] == said(frames, MOVE, "Sorry Noor, I'm out")
    # Dev's reason comes after Priya's "Noooo why?"; Sam's in the same message.
    why_dev = ask(retriever, WHITBY, "Why can't Dev come?")
    assert "My boss moved the year-end audit to that weekend" in why_dev.answer
    assert why_dev.claims[0].ids == [said(frames, WHITBY, "My boss moved"), said(frames, WHITBY, "Bad news guys")]
    why_sam = ask(retriever, MOVE, "Why can't Sam help?")
    assert "My sister's wedding got moved to Saturday" in why_sam.answer


@pytest.mark.slow
def test_a_when_question_asked_in_the_chat_is_answered_by_its_reply_not_by_its_date(chats):
    retriever, frames = chats
    keys = ask(retriever, MOVE, "When do the old flat keys have to go back?")
    assert keys.answer == "Monday the 27th"
    assert keys.claims[0].ids == [said(frames, MOVE, "Letting agent wants them"), said(frames, MOVE, "When do the old")]


@pytest.mark.slow
def test_amounts_with_their_currency_and_things_never_said(chats):
    retriever, _ = chats
    assert (
        ask(retriever, WHITBY, "How much was the cottage deposit?").answer == "£150"
    )  # "five of us. ... £150 deposit"
    assert ask(retriever, MOVE, "How much of the deposit did Noor get back?").answer == "£850"
    pizza = ask(retriever, MOVE, "How much did the pizza cost?")  # "Pizza at mine in 20 mins": no cost
    assert pizza.answer == NO_ANSWER and pizza.abstained
    # "Tom Ashworth named the group Whitby cousins" is Messenger's line, not Tom naming anything
    dog = ask(retriever, WHITBY, "What is the name of Tom's dog?")
    assert dog.abstained and "Whitby" not in dog.answer


def test_a_number_written_with_its_currency_is_an_amount_whatever_follows():
    assert [a[1] for a in amounts("Great, five of us. I'll pay the £150 deposit tonight")] == ["£150"]
    assert [a[1] for a in amounts("Got £850 of the £950 deposit back")] == ["£850", "£950"]
    assert [a[1] for a in amounts("Pizza at mine in 20 mins")] == []


def test_withdrawing_is_a_no_and_running_out_of_something_is_not():
    assert NEGATIVE.search("Sorry Noor, I'm out.") and NEGATIVE.search("Count me out this time")
    assert NEGATIVE.search("Jo dropped out last night")
    assert not NEGATIVE.search("I'm out of milk, can you grab some") and not NEGATIVE.search("Out at 6 tonight")


def test_a_cost_is_not_answered_by_a_duration():
    evidence = _messages("Pizza at mine in 20 mins")
    assert answer_slot("How much did the pizza cost?", "how_many", evidence) is None
    assert answer_slot("How many mins until the pizza?", "how_many", evidence).text == "20 mins"


def test_the_question_set_is_well_formed():
    questions = json.loads((SET / "questions.json").read_text())["questions"]
    assert len(questions) == 41 and len({q["chat"] for q in questions}) == 2
    assert {q["kind"] for q in questions} == {"who", "when", "where", "how_much", "yes_no", "why", "never_said"}
    assert all(q["required"] or q["kind"] == "never_said" for q in questions)


def _messages(*texts: str) -> list[ChatMessage]:
    return [
        ChatMessage(f"m{i}", f"c/m{i}", i, 0, "Noor", text, datetime(2025, 10, 6, 19, i))
        for i, text in enumerate(texts)
    ]


def test_where_reads_an_address_and_the_place_of_the_thing_asked_about():
    new_flat = _messages(
        "Amazing. New place is 14 Carlton Road, second floor, no lift", "Let's start at 9 at the old flat"
    )
    assert answer_slot("Where is the new flat?", "where", new_flat).text == "14 Carlton Road"
    # "at the old flat" does not say where the new flat is
    assert answer_slot("Where is the new flat?", "where", new_flat[1:]) is None
    cottage = _messages(
        "I'll pick everyone up from Scarborough in the van, it's 30 mins to the cottage",
        "Right cousins, I've found a cottage in Robin Hood's Bay",
    )
    assert answer_slot("Where is the cottage?", "where", cottage).text == "Robin Hood's Bay"
    assert answer_slot("Where do we get picked up?", "where", cottage).text == "Scarborough"
