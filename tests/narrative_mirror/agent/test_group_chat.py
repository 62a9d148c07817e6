"""Issue #26's done-when check for group chats: a hand-made six-person Discord export
(tests/fixtures/discord_offsite_group.json: 51 messages over three days, 27 replies, one join
line) read by the Discord reader, its layers and index rows built as the asset graph builds them
into a real LanceDB with the real embedder, then asked offline: who said something (the author of
the matching message) and who answered whom (the reply's id, by its reply link), with the exact
evidence each answer cites."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from index_frames import index_messages

from narrative_mirror.embedding import message_texts
from narrative_mirror.exports.folder import ImportOptions, find_folder_chats
from narrative_mirror.exports.frames import load_export_chat
from narrative_mirror.index_store import IndexStore
from narrative_mirror.query import ask
from narrative_mirror.retrieval.engine import Retriever

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "discord_offsite_group.json"


def msg(n: int) -> str:
    """The Discord id of the fixture's message number ``n`` (0 = the join line)."""
    return str(1214000000000000000 + 1000 * n)


@pytest.fixture(scope="module")
def group(tmp_path_factory, embedder):
    """(retriever, chat key, messages) of the fixture, built through the export reader and layers."""
    folder = tmp_path_factory.mktemp("exports")
    (folder / FIXTURE.name).write_bytes(FIXTURE.read_bytes())
    options = ImportOptions(machine_tz="UTC")
    chats, problems = find_folder_chats(folder, options)
    assert problems == [] and len(chats) == 1
    ((key, source),) = chats.items()
    messages = load_export_chat(source, options).messages.with_columns(
        pl.lit(key).alias("chat_file"), (pl.lit(f"{key}/") + pl.col("local_id")).alias("message_id")
    )
    vectors = embedder.encode(message_texts(messages))
    store = IndexStore(str(tmp_path_factory.mktemp("home") / "lancedb"))
    index_messages(store, messages, vectors)
    return Retriever(store, embedder), key, messages


def test_the_export_reaches_the_index_with_its_reply_links(group):
    retriever, key, messages = group
    assert messages.height == 51 and messages["speaker"].n_unique() == 6
    assert messages["session"].max() == 5  # Monday morning and afternoon, Tuesday morning and evening, Thursday
    chat = retriever.chat(key)
    assert chat.size == 50  # the join line is in the transcript, not in the index
    assert sorted(chat.speaker_names) == ["Ana", "Bruno", "Chloe", "Dmitri", "Esther", "Farid"]
    assert retriever.store.messages_for(key).filter(pl.col("local_id") == msg(8))["reply_to"].to_list() == [msg(7)]
    assert [chat.local_ids[r] for r in chat.linked_rows(chat.row_of[msg(26)])] == [msg(27), msg(28), msg(29)]
    assert [chat.local_ids[r] for r in chat.linked_rows(chat.row_of[msg(30)])] == [msg(29), msg(31)]


@pytest.mark.parametrize(
    ("question", "author", "said", "context"),
    [
        ("Who suggested the offsite in Porto?", "Chloe", 3, [4, 5]),
        ("Who offered to book the hotel?", "Esther", 10, [11]),
        ("Who will present the roadmap?", "Ana", 33, [32]),
    ],
)
def test_who_said_it_answers_the_author_of_the_message(group, question, author, said, context):
    retriever, key, _ = group
    answer = ask(retriever, key, question)
    assert answer.answer == author
    assert [(c.text, c.ids, c.supported) for c in answer.claims] == [(author, [msg(said)], True)]
    assert [e.id for e in answer.evidence] == [msg(n) for n in [said, *context]]


@pytest.mark.parametrize(
    ("question", "answer_text", "reply", "asked", "context"),
    [
        (
            "What did Bruno answer to Ana about the budget?",
            "About 4,000 euros for travel and the hotel, meals come on top.",
            8,
            7,
            [9],
        ),
        (
            "What did Farid reply to Chloe about the flights?",
            "Lisbon to Porto is 45 euros by train, Berlin flights are around 120 each.",
            18,
            17,
            [19],
        ),
        ("Who replied to Dmitri about the login bug?", "Esther", 13, 12, []),
        ("Who answered Chloe about the boat tour?", "Bruno", 31, 30, [29]),  # 30 answers 29: the chain
    ],
)
def test_reply_questions_follow_the_reply_links(group, question, answer_text, reply, asked, context):
    retriever, key, _ = group
    answer = ask(retriever, key, question)
    assert answer.answer == answer_text
    assert [(c.ids, c.supported) for c in answer.claims] == [([msg(reply), msg(asked)], True)]
    assert [e.id for e in answer.evidence] == [msg(n) for n in [reply, asked, *context]]
    assert answer.evidence[0].point.startswith(f"reply to {msg(asked)}")
