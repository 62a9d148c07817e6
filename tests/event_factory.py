"""Retrieval events for tests: ``event(...)`` with defaults for every field a test does not name."""

from __future__ import annotations

from datetime import UTC, datetime

from narrative_mirror.events.record import RetrievalEvent

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def event(query: str = "Where does Ana work?", user: str = "u1", at: datetime = T0, **fields) -> RetrievalEvent:
    defaults = {"chat_file": "chat_a", "returned_ids": ["D1:1", "D1:2"], "method": "hybrid"}
    return RetrievalEvent(user_id=user, query=query, created_at=at, **{**defaults, **fields})
