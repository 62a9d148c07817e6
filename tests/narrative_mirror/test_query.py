"""The Python API end to end: a chat file loaded, layered, indexed and queried."""

import polars as pl
import pytest
from chat_factory import small_chat, write_chat

from narrative_mirror import schema, settings
from narrative_mirror.agent.contract import AgentAnswer, ArcAnswer, DebugTrace, answer_json
from narrative_mirror.agent.narrative import MAX_IDS
from narrative_mirror.chats import load_chat
from narrative_mirror.embedding import message_search_text
from narrative_mirror.index_rows import build_rows
from narrative_mirror.index_store import IndexStore
from narrative_mirror.layers import build_topic_blocks, compute_signals
from narrative_mirror.query import arc, ask, trace
from narrative_mirror.retrieval.engine import Retriever

CHAT = "api_chat_Ana_Ben"


@pytest.fixture(scope="module")
def retriever(embedder, tmp_path_factory):
    chat = load_chat(write_chat(tmp_path_factory.mktemp("chats"), CHAT, small_chat()))
    messages = chat.messages
    vectors = embedder.encode([message_search_text(s, t) for s, t in zip(messages["speaker"], messages["text"])])
    config = settings.load_config("layers")
    blocks = build_topic_blocks(messages, vectors, config)
    signals = compute_signals(messages, blocks, config)
    embeddings = pl.DataFrame(
        {
            "message_id": messages["message_id"],
            "chat_file": messages["chat_file"],
            "local_id": messages["local_id"],
            "vector": [v.tolist() for v in vectors],
        },
        schema=schema.MESSAGE_EMBEDDINGS,
    )
    store = IndexStore(str(tmp_path_factory.mktemp("lancedb")))
    for table, rows in build_rows(messages, embeddings, signals=signals, blocks=blocks).items():
        store.replace_partition(table, CHAT, rows)
    return Retriever(store, embedder)


def test_ask_returns_the_output_contract(retriever):
    answer = ask(retriever, CHAT, "Where does Ana work?", profile="fast")
    assert isinstance(answer, AgentAnswer) and answer.profile == "fast" and answer.mode == "agent"
    dumped = answer_json(answer)
    assert {"answer", "evidence", "unknowns", "route", "rounds", "calls", "stop_reason", "degraded", "trace"} <= set(
        dumped
    )
    assert not {"Answer", "Evidence", "Unknowns"} & set(dumped)  # one shape: the snake_case names
    assert {"D1:1", "D1:3"} & set(answer.selected_ids)  # "new job at the bakery" / "on Elm Street"
    assert all(
        set(item) == {"id", "text", "point", "speaker", "timestamp", "chat", "edited", "reactions"}
        for item in dumped["evidence"]
    )
    assert {item["chat"] for item in dumped["evidence"]} == {CHAT}
    assert all(
        item["text"].startswith(f"{item['speaker']}: ") and item["timestamp"].startswith("20")
        for item in dumped["evidence"]
    )
    assert AgentAnswer.model_validate(dumped) == answer


def test_trace_gives_the_same_checkpoints_as_ask(retriever):
    checkpoints = trace(retriever, CHAT, "How many loaves did Ana bake?")
    assert isinstance(checkpoints, DebugTrace)
    assert checkpoints == ask(retriever, CHAT, "How many loaves did Ana bake?").trace
    assert checkpoints.final and checkpoints.reranked and checkpoints.candidates


def test_arc_returns_phases_with_evidence(retriever):
    story = arc(retriever, CHAT, "How did Ana's new job at the bakery go?", profile="fast")
    assert isinstance(story, ArcAnswer) and story.route == "global" and story.phases
    ids = story.selected_ids
    assert len(ids) == len(set(ids)) and all(len(p.evidence) <= MAX_IDS for p in story.phases)
    assert set(ids) <= {f"D{d}:{n}" for d in (1, 2) for n in range(1, 5)}


def test_oneshot_mode_is_deprecated(retriever):
    with pytest.warns(DeprecationWarning, match="deprecated"):
        answer = ask(retriever, CHAT, "Where does Ana work?", mode="oneshot")
    assert answer.mode == "oneshot" and answer.route == "oneshot"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"question": "  "}, "question: must be a non-empty string"),
        ({"mode": "fancy"}, r"mode 'fancy': expected one of \['agent', 'oneshot'\]"),
        ({"profile": "quick"}, "unknown profile 'quick'"),
        ({"chat_file": "Chat_99"}, r"unknown chat_file 'Chat_99'; indexed chat files: \['api_chat_Ana_Ben'\]"),
    ],
)
def test_bad_arguments_are_named_in_the_error(retriever, kwargs, message):
    call = {"chat_file": CHAT, "question": "Where does Ana work?"} | kwargs
    with pytest.raises(ValueError, match=message):
        ask(retriever, call.pop("chat_file"), call.pop("question"), **call)
