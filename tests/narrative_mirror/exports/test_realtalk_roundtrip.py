"""Issue #26's done-when check, small: the first sessions of RealTalk's Chat_1 written out as a
WhatsApp Android export (12-hour clock, no seconds: the lossiest format) import with the same
texts, speakers and sessions and give the same recall@10 as the native JSON, hits matched by
text. All six formats on whole train chats: benchmarks/export_retrieval.py."""

from __future__ import annotations

import realtalk_exports as rx

from narrative_mirror.chats import load_chat
from narrative_mirror.index_store import IndexStore
from narrative_mirror.retrieval.engine import Retriever


def test_chat_1_as_a_whatsapp_export_retrieves_as_the_native_json(realtalk_dir, embedder, tmp_path):
    chat = rx.subset(load_chat(realtalk_dir / "Chat_1_Emi_Elise.json"), sessions=3)
    exported = rx.export_chat(chat, "whatsapp_android_12h", tmp_path / "export", "America/Chicago")
    assert exported.messages["text"].to_list() == chat.messages["text"].to_list()
    assert exported.messages["speaker"].to_list() == chat.messages["speaker"].to_list()
    assert exported.messages["session"].to_list() == chat.messages["session"].to_list()
    # Minutes survive the 12-hour clock (seconds are not in the format).
    assert (
        exported.messages["timestamp"].dt.truncate("1m").to_list()
        == chat.messages["timestamp"].dt.truncate("1m").to_list()
    )

    vectors = rx.TextVectors(embedder)
    store = IndexStore(str(tmp_path / "lancedb"))
    rx.index(store, chat, "native", vectors)
    rx.index(store, exported, "whatsapp", vectors)
    retriever = Retriever(store, vectors)
    questions = rx.gold_texts(chat)
    assert len(questions) == 6
    native = rx.recall_by_text(retriever, "native", chat, questions)
    assert abs(rx.recall_by_text(retriever, "whatsapp", exported, questions) - native) <= 0.01
