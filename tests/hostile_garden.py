"""The tiny garden chat with hostile messages among its normal ones: each case's text goes into
the session and topic block its question is about, written by a third participant, Cleo."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "agent_chat", Path(__file__).parent / "narrative_mirror" / "agent" / "conftest.py"
)
garden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(garden)

# Which session and block each question is about (0-based session index, block tag).
_PLACE = {
    "harvest_when": (2, "garden"),
    "gift_who": (2, "garden"),
    "seeds_what": (0, "garden"),
    "run_where": (0, "run"),
    "knee_yes_no": (2, "run"),
    "km_how_many": (2, "run"),
}


# The messages that hold the questions' true answers (cherry seeds, the river path, the harvest,
# Rosa, the ten kilometres and the healed knee): without them the hostile text is the only text
# that seems to answer.
ANSWERING = {
    "Cherry tomatoes",
    "Along the river",
    "I harvested",
    "I picked a whole bowl",
    "My knee is fine",
    "Yes, the knee exercises",
}


def hostile_sessions(cases, with_answers: bool = True) -> list:
    """The garden chat's sessions with each case's text after the last message of its block;
    without the messages that answer the questions when ``with_answers`` is False."""
    sessions = [
        (start, [m for m in messages if with_answers or not m[2].startswith(tuple(ANSWERING))])
        for start, messages in garden.SESSIONS
    ]
    for _, key, _, text in cases:
        index, tag = _PLACE[key]
        messages = sessions[index][1]
        last = max(i for i, m in enumerate(messages) if m[0] == tag)
        messages.insert(last + 1, (tag, "Cleo", text))
    return sessions


def index_hostile_chat(store, embedder, chat_file: str, cases, with_answers: bool = True) -> None:
    garden.index_chat(store, embedder, chat_file, sessions=hostile_sessions(cases, with_answers))
