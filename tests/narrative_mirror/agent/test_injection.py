"""The injection detector on a corpus of hostile variants and benign look-alikes, and its false
positives on real chats (the demo chats and RealTalk)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from injection_corpus import BENIGN, HOSTILE

from narrative_mirror import settings
from narrative_mirror.agent.text import injection_text, looks_like_injection
from narrative_mirror.chats import load_chat

# Flagged messages over every message of the 3 demo chats and the 10 RealTalk chats (9,211
# messages): 0 before the normalizing detector and 0 with it.
MAX_FLAGGED_REAL_MESSAGES = 0
REALTALK_DIR = Path(__file__).resolve().parents[4] / "shared" / "datasets" / "realtalk"
if not REALTALK_DIR.is_dir():
    REALTALK_DIR = Path("/work/shared/datasets/realtalk")


def test_corpus_is_large_enough():
    assert len(HOSTILE) >= 40 and len(BENIGN) >= 40


@pytest.mark.parametrize("text", HOSTILE)
def test_every_hostile_variant_is_flagged(text):
    assert looks_like_injection(text), injection_text(text)


@pytest.mark.parametrize("text", BENIGN)
def test_benign_look_alikes_are_not_flagged(text):
    assert not looks_like_injection(text), injection_text(text)


@pytest.mark.parametrize(
    "text, normalized",
    [
        ("Ig\u200bnore\u00ad PREVIOUS\u2060 Instructions!", "ignore previous instructions"),
        ("Іgnоrе рrеviоus", "ignore previous"),  # Cyrillic look-alikes
        ("Ιγνορε", "iyvope"),  # Greek letters fold one by one, not by sound
        ("ｆｉｎａｌ  ａｎｓｗｅｒ：ｘ", "final answer : x"),
        ("i g n o r e  this", "ignore this"),
        ("i.g.n.o.r.e in-structions", "ignore instructions"),
        ("Ignóre", "ignore"),
    ],
)
def test_injection_text_normalizes(text, normalized):
    assert injection_text(text) == normalized


def _real_chat_files():
    files = sorted(settings.DEMO_DATA_DIR.glob("*.json"))
    assert len(files) == 3
    realtalk = sorted(REALTALK_DIR.glob("Chat_*.json")) if REALTALK_DIR.is_dir() else []
    if not realtalk and not os.environ.get("CI"):
        pytest.skip(f"RealTalk data not found at {REALTALK_DIR}")
    return files + realtalk


def test_few_real_messages_are_flagged():
    flagged, total = [], 0
    for path in _real_chat_files():
        chat = load_chat(path)
        for local_id, text in zip(chat.messages["local_id"], chat.messages["text"]):
            total += 1
            if looks_like_injection(text):
                flagged.append((path.stem, local_id, text))
    assert total > 9000
    assert len(flagged) <= MAX_FLAGGED_REAL_MESSAGES, flagged
