"""Group chats (issue #26): reply links in the index (an older table takes the column), in
ChatIndex and in expansion; first names and reply-addressed vocatives for N speakers."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
from index_frames import DIM, TEXTS, chat_frames

from narrative_mirror.agent.people import author_question
from narrative_mirror.agent.planner import facets_offline, reply_question
from narrative_mirror.index_rows import build_rows, columns_added, message_rows
from narrative_mirror.index_store import IndexStore
from narrative_mirror.layers.text import speaker_words
from narrative_mirror.retrieval.chat_index import ChatIndex
from narrative_mirror.retrieval.engine import Retriever
from narrative_mirror.retrieval.expansion import expand
from narrative_mirror.retrieval.query_names import first_names, persons, speaker_aliases, without_persons


def _rows(chat_file: str, reply_to: list[str | None] | None = None) -> dict[str, pa.Table]:
    messages, embeddings, blocks, signals, threads = chat_frames(chat_file, TEXTS)
    if reply_to is not None:
        messages = messages.with_columns(pl.Series("reply_to", reply_to, dtype=pl.String))
    return build_rows(messages, embeddings, signals=signals, blocks=blocks, threads=threads)


def test_reply_links_reach_the_index_and_chat_index(tmp_path):
    store = IndexStore(str(tmp_path / "db"))
    for table, rows in _rows("group", [None, None, "D1:1", "D1:1"]).items():
        store.replace_partition(table, "group", rows)
    for table, rows in _rows("pair").items():  # a chat file without reply links
        store.replace_partition(table, "pair", rows)
    assert store.messages_for("group")["reply_to"].to_list() == [None, None, "D1:1", "D1:1"]
    assert store.messages_for("pair")["reply_to"].to_list() == [None] * 4
    chat = ChatIndex(
        "group", store.messages_for("group"), store.blocks_for("group"), store.threads_for("group"), window=1, stem=True
    )
    assert chat.parent_row.tolist() == [-1, -1, 0, 0]
    assert chat.reply_rows == {0: [2, 3]}
    assert chat.linked_rows(0) == [2, 3] and chat.linked_rows(3) == [0] and chat.linked_rows(1) == []
    pair = ChatIndex(
        "pair", store.messages_for("pair"), store.blocks_for("pair"), store.threads_for("pair"), window=1, stem=True
    )
    assert pair.reply_rows == {} and pair.linked_rows(1) == []
    # Speakers alternate A, B, A, B: D1:1 (A) is answered by its linked reply of the other speaker,
    # D1:4 (B), not by the next message; a message without linked replies by the next message of
    # the other speaker.
    retriever = Retriever(store, embedder=None)
    assert retriever.replies("group", ["D1:1", "D1:2", "D1:3", "D1:4"]) == {
        "D1:1": "D1:4",
        "D1:2": "D1:3",
        "D1:3": "D1:4",
    }
    assert retriever.replies("pair", ["D1:1"]) == {"D1:1": "D1:2"}


def test_a_table_written_before_the_reply_column_takes_it(tmp_path):
    store = IndexStore(str(tmp_path / "db"))
    messages, embeddings, *_ = chat_frames("old", TEXTS)
    new_rows = message_rows(messages, embeddings)
    late = ("reply_to", "edited", "bot", "reactions")
    old_rows = new_rows.drop_columns(list(late))  # as index_rows wrote them before those columns
    added = [new_rows.schema.field(name) for name in late]
    assert columns_added(old_rows.schema, new_rows.schema) == added
    assert columns_added(new_rows.schema, new_rows.schema) == []
    assert columns_added(new_rows.schema.remove(0), new_rows.schema) == []  # another difference: not an upgrade
    store.replace_partition("messages", "old", old_rows)
    assert "reply_to" not in store.messages_for("old").columns
    chat = ChatIndex(
        "old", store.messages_for("old"), store.blocks_for("old"), store.threads_for("old"), window=1, stem=True
    )  # an old home is still searchable before its rebuild
    assert chat.reply_rows == {}
    linked = messages.with_columns(pl.Series("reply_to", [None, "D1:1", None, None], dtype=pl.String))
    store.replace_partition(
        "messages",
        "new",
        message_rows(
            linked.with_columns(pl.lit("new").alias("chat_file"), ("new/" + pl.col("local_id")).alias("message_id")),
            embeddings.with_columns(
                pl.lit("new").alias("chat_file"), ("new/" + pl.col("local_id")).alias("message_id")
            ),
        ),
    )
    assert store.messages_for("old")["reply_to"].to_list() == [None] * 4
    assert store.messages_for("new")["reply_to"].to_list() == [None, "D1:1", None, None]


def test_expansion_lends_scores_along_reply_links_only_where_given():
    ranked = [(10, 1.0), (3, 0.8)]
    links = {10: [2], 3: [10, 15]}
    out, source = expand(ranked, 20, seeds=2, before=0, after=0, decay=0.5, linked=lambda r: links.get(r, []))
    assert out == [(10, 1.0), (3, 0.8), (2, 0.5), (15, 0.4)]
    assert source == {2: "reply", 15: "reply"}
    assert expand(ranked, 20, seeds=2, before=0, after=0, decay=0.5) == (ranked, {})


def test_full_names_are_asked_by_first_name_when_unique():
    speakers = ["Ana Souza", "Ana Lima", "Bruno Costa", "Chloe"]
    assert first_names(speakers) == {"bruno": "Bruno Costa"}
    assert persons("What did Bruno answer to Chloe?", speakers) == ["Bruno Costa", "Chloe"]
    assert persons("What did Ana say?", speakers) == []  # two Anas: not guessed
    assert without_persons("Did Bruno's plan work?", speakers) == "Did plan work?"
    assert first_names(["Emi", "Elise"]) == {}  # two-person research chats: names as before


def test_group_vocatives_vote_for_the_author_of_the_message_replied_to():
    messages = [
        ("Ana", "Kate! The slides are done?"),
        ("Bruno", "Thanks, Kate!"),
        ("Chloe", "hi Kate, welcome"),
        ("Dora", "Great work, thanks Kate!"),
        ("Dora", "Kate!"),
    ]
    assert speaker_aliases(messages) == {}  # without reply links nobody is known to be addressed
    addressed = [None, "Dora", "Dora", None, "Chloe"]
    assert speaker_aliases(messages, addressees=addressed) == {"Kate": "Dora"}
    two = [("Emi", "Thanks, Kate!"), ("Elise", "Sure"), ("Emi", "Kate! Hello")]
    assert speaker_aliases(two) == speaker_aliases(two, addressees=[None, None, None]) == {"Kate": "Elise"}


def test_speaker_words_add_the_parts_of_full_names():
    assert speaker_words(["Emi", "Elise"]) == {"emi", "elise"}
    assert speaker_words(["Ana Souza", "Bo"]) == {"ana souza", "ana", "souza", "bo"}


def test_author_questions():
    assert author_question("Who suggested the offsite in Porto?") == "saying"
    assert author_question("Who offered to book the hotel?") == "saying"
    assert author_question("Who will present the roadmap?") == "first_person"
    assert author_question("Who is presenting the roadmap?") == "first_person"
    # a verb of saying ("bring up") with "is ...ing" asks who will do it: answered by "I'll bring mine"
    assert author_question("Who is bringing the ball?") == "first_person"
    assert author_question("Who brought the idea up?") == "saying"
    assert author_question("Who brought up the move?") == "saying"
    # bringing a thing is an act: the conversation names who did it ("I have one, it's in my boot")
    assert author_question("Who brought the gazebo?") is None
    for question in (
        "Who did Kate meet at Art Basel?",
        "Who is Kate's sister?",
        "Who visited Kate?",
        "What did Ana suggest?",
    ):
        assert author_question(question) is None


def test_reply_questions_keep_the_verb_of_replying_out_of_the_topic():
    assert reply_question("What did Bruno answer to Ana about the budget?")
    assert reply_question("Who replied to Dmitri about the login bug?")
    assert not reply_question("What did Emi say about the movie?")  # says, to nobody: an ordinary question
    facets = facets_offline("What did Bruno answer to Ana about the budget?")
    assert (facets.intent, facets.target, facets.artifact) == ("what", ["Bruno", "Ana"], ["budget"])
    assert facets_offline("What did Emi say about the movie?").artifact == ["movie"]
    assert facets_offline("Who answered the phone?").artifact == ["phone"]


class _OneVector:
    """Every text gets the same unit vector: the dense lists rank by the message vectors alone."""

    def encode(self, texts, progress=None):
        return np.full((len(texts), DIM), DIM**-0.5, dtype=np.float32)


def test_reply_links_change_no_ranking_of_the_other_variants(tmp_path):
    store = IndexStore(str(tmp_path / "db"))
    for chat_file, links in (("linked", [None, None, "D1:1", "D1:1"]), ("plain", None)):
        for table, rows in _rows(chat_file, links).items():
            store.replace_partition(table, chat_file, rows)
    retriever = Retriever(store, _OneVector())

    def ranking(chat_file: str, variant: str) -> list[tuple[str, float]]:
        return [(h.local_id, h.score) for h in retriever.search(chat_file, "new bike", 4, variant=variant).hits]

    # Only hybrid_expand reads the links (test_expansion_lends_scores_along_reply_links_only_where_given).
    for variant in ("hybrid_learned", "hybrid", "bm25", "dense", "dual_path"):
        assert ranking("linked", variant) == ranking("plain", variant), variant
