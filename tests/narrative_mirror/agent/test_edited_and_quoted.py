"""Edited messages count as edited, and an unsure answer quotes its best message whole.

A WhatsApp export written for these tests (a book club's group chat, one message edited) is read
by the export reader and built into a real LanceDB with the real embedder; the questions are
asked offline through the whole agent."""

from __future__ import annotations

from datetime import datetime

import polars as pl
import pytest
from index_frames import index_whatsapp_text

from narrative_mirror import schema
from narrative_mirror.agent import quoting
from narrative_mirror.index_store import IndexStore
from narrative_mirror.query import ask
from narrative_mirror.reactions import Reaction
from narrative_mirror.retrieval.engine import Retriever
from narrative_mirror.retrieval.records import ChatMessage

BOOK_CLUB = """\
13/05/2026, 09:10 - Lena: Book club this Thursday, who's hosting?
13/05/2026, 09:12 - Omar: I can host at mine
13/05/2026, 09:15 - Lena: Great. Let's start at 7:30pm <This message was edited>
13/05/2026, 09:20 - Omar: I'll bake a lemon cake for everyone
13/05/2026, 09:31 - Priti: I finished the novel last night, the ending was wild
13/05/2026, 09:40 - Lena: No spoilers please, I'm still on chapter nine
13/05/2026, 09:52 - Omar: I borrowed the paperback from the library this week
14/05/2026, 18:00 - Priti: Drinks at mine after book club next month?
"""


@pytest.fixture(scope="module")
def book_club(tmp_path_factory, embedder):
    """(retriever, chat key, messages) of the book club export."""
    return index_whatsapp_text(tmp_path_factory.mktemp("book_club"), "Book club", BOOK_CLUB, embedder)


def test_an_edited_message_is_what_was_said_and_the_answer_says_it_was_edited(book_club):
    retriever, key, messages = book_club
    edited_id = messages.filter(pl.col("text").str.contains("7:30pm"))["local_id"][0]
    answer = ask(retriever, key, "What time does book club start?")
    assert not answer.abstained
    assert answer.answer.startswith("7:30pm") and "Lena edited that message" in answer.answer
    shown = {item.id: item for item in answer.evidence}
    assert shown[edited_id].edited and "edited" in shown[edited_id].point
    # the mark belongs to the edited message only
    assert not any(item.edited for i, item in shown.items() if i != edited_id)


def test_an_answer_from_a_message_never_edited_is_not_marked(book_club):
    retriever, key, _ = book_club
    answer = ask(retriever, key, "Who is hosting book club?")
    assert answer.answer == "Omar"
    assert not any(item.edited for item in answer.evidence)


def test_a_question_offering_two_answers_is_answered_with_one_of_them_not_yes(book_club):
    # "the paperback or the ebook?": "Yes" answers neither; the message names the paperback
    retriever, key, _ = book_club
    answer = ask(retriever, key, "Is Omar reading the paperback or the ebook?")
    assert answer.answer == "paperback"


def test_a_quote_names_the_author_and_time_and_marks_an_edit():
    said = ChatMessage("m1", "c/m1", 0, 0, "Mara", "We meet at the  boathouse\nat noon", datetime(2024, 5, 3, 14, 2))
    assert quoting.quote(said) == 'Mara, 3 May 2024 14:02: "We meet at the boathouse at noon"'
    dated = ChatMessage("m2", "c/m2", 1, 0, "Mara", "ok", datetime(2024, 5, 3), edited=True)
    assert quoting.quote(dated) == 'Mara, 3 May 2024: "ok" (edited)'
    long = ChatMessage("m3", "c/m3", 2, 0, "Mara", "word " * 200, None)
    assert quoting.quote(long).startswith('Mara: "word') and len(quoting.quote(long)) < quoting.LONGEST_QUOTE + 20


@pytest.mark.parametrize(
    ("drafted", "kept", "stated", "expected"),
    [
        (2, 1, [True], True),  # the evidence answers only part: quote
        (1, 1, [False], True),  # kept, but its message is not about what is asked: quote
        (1, 1, [True], False),  # answered and stated: the answer as drafted
        (1, 0, [], False),  # nothing kept: an abstention, not a quote
    ],
)
def test_unsure_is_a_dropped_claim_or_none_about_the_question(drafted, kept, stated, expected):
    assert quoting.unsure(drafted, kept, stated) is expected


def test_an_index_written_before_edits_were_kept_gains_the_column_and_reads_not_edited(tmp_path, embedder):
    """A messages table without the ``edited``, ``bot`` and ``reactions`` columns (written before
    they existed) takes them as added columns when another chat is written: the old chat's messages
    read as not edited, by no bot and without reactions; the new chat's edit, bot and reactions are
    kept."""
    from index_frames import TEXTS, chat_frames

    from narrative_mirror.index_rows import build_rows

    store = IndexStore(str(tmp_path / "lancedb"))
    messages, embeddings, blocks, signals, threads = chat_frames("old_chat", TEXTS)
    old = build_rows(messages, embeddings, signals=signals, blocks=blocks, threads=threads)
    store.replace_partition("messages", "old_chat", old["messages"].drop_columns(["edited", "bot", "reactions"]))
    messages, embeddings, blocks, signals, threads = chat_frames("new_chat", ["we meet at 7", "see you then"])
    thumbs = [{"emoji": "👍", "people": ["Sam", "Dee"], "count": 3}]
    messages = messages.with_columns(
        pl.Series("edited", [True, False]),
        pl.Series("bot", [False, True]),
        pl.Series("reactions", [thumbs, []], dtype=pl.List(schema.REACTION)),
    )
    new = build_rows(messages, embeddings, signals=signals, blocks=blocks, threads=threads)
    store.replace_partition("messages", "new_chat", new["messages"])
    retriever = Retriever(store, embedder)
    assert retriever.chat("old_chat").edited == retriever.chat("old_chat").bots == [False] * len(TEXTS)
    assert retriever.chat("new_chat").bots == [False, True]
    first, second = retriever.messages("new_chat", ["D1:1", "D1:2"])
    assert (first.edited, second.edited) == (True, False)
    assert retriever.chat("old_chat").reactions == [()] * len(TEXTS)
    assert (first.reactions, second.reactions) == ((Reaction("👍", ("Sam", "Dee"), 3),), ())


def test_an_unsure_phrase_is_replaced_by_its_message_and_a_typed_value_keeps_it_before_the_quote():
    from types import SimpleNamespace

    from narrative_mirror.agent.answer import Claim

    said = ChatMessage("m1", "c/m1", 0, 0, "Nora", "I have choir on Wednesdays", datetime(2026, 5, 11, 17, 30))
    evidence = {"m1": SimpleNamespace(message=said)}
    quoted = 'Nora, 11 May 2026 17:30: "I have choir on Wednesdays"'
    assert quoting.best_quoted([Claim("choir on", ["m1"], kind="phrase")], evidence) == quoted
    assert quoting.best_quoted([Claim("No", ["m1"], kind="yes_no")], evidence) == f"No. {quoted}"
    # a number read from the conversation is a value too ("42 each"), not a fragment
    assert quoting.best_quoted([Claim("42 each", ["m1"], kind="phrase")], evidence) == f"42 each. {quoted}"
    assert quoting.best_quoted([Claim("No", ["gone"], kind="yes_no")], evidence) is None


def test_where_answered_by_a_home_is_the_authors_place(book_club):
    # "Where is book club?" answered by "I can host at mine": at Omar's place, his message cited
    retriever, key, messages = book_club
    host_id = messages.filter(pl.col("text") == "I can host at mine")["local_id"][0]
    answer = ask(retriever, key, "Where is book club?")
    assert not answer.abstained and answer.answer.startswith("at Omar's place")
    assert answer.claims[0].ids[0] == host_id and answer.claims[0].supported
    offered = ask(retriever, key, "Where are the drinks?")  # a home offered as a question: a proposal
    assert offered.answer.startswith("at Priti's place")
