"""Readiness: what ``serve`` does before it accepts a connection, so that the first asks meet their
deadline (a cold server spent 11-14 s on its first `fast` asks, against 8 s: the embedder loads on
its first query, each chat is read into memory on its first search, the agent's modules on the
first ask).

``warm_up`` does that work once: loads the embedder and encodes a query, reads each served chat
into the retriever's cache, and answers one offline question on one chat (``Memory.trace``: no
retrieval event, no recall-run file). ``create_app(warm_up=...)`` runs it before the server binds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from narrative_mirror import Memory

log = logging.getLogger(__name__)

WARM_UP_QUESTION = "What did they talk about?"


def warm_up(retriever: Any, chats: Sequence[str]) -> dict[str, float]:
    """Loads what the first requests would load; returns the seconds each part took."""
    took: dict[str, float] = {}
    started = time.monotonic()
    retriever.embedder.encode([WARM_UP_QUESTION])
    took["embedder"] = time.monotonic() - started
    started = time.monotonic()
    for chat in chats:
        retriever.chat(chat)
    took["chats"] = time.monotonic() - started
    if chats:
        started = time.monotonic()
        Memory(None, retriever=retriever).trace(chats[0], WARM_UP_QUESTION, "fast")  # offline, nothing logged
        took["ask"] = time.monotonic() - started
    log.info("warmed up: %s", ", ".join(f"{part} {seconds:.1f} s" for part, seconds in took.items()))
    return took
