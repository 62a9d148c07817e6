"""Follow-up linking: a query whose embedding has cosine > ``similarity`` (0.7 by default) with an
earlier query of the SAME user within the window (10 minutes by default) gets ``follow_up_of`` =
the most recent such event, and that earlier event is marked ``satisfied = False``.

Earlier queries come from memory, or from the table for a user this process has not seen yet
(a CLI run per question still links follow-ups). ``EventLog``'s writer thread calls ``link``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from narrative_mirror.events.table import quote, sql_time

if TYPE_CHECKING:
    from narrative_mirror.embedding import Embedder

log = logging.getLogger(__name__)


@dataclass
class _Recent:
    event_id: str
    created_at: datetime
    vector: np.ndarray


class FollowUpLinker:
    """Links each new event row to the earlier event it follows up, per user.

    ``open_table``: returns the stored events table, or None while there is none yet.
    """

    def __init__(self, embedder: Embedder, window: timedelta, similarity: float, open_table: Callable[[], Any]):
        self.embedder = embedder
        self.window = window
        self.similarity = similarity
        self._open_table = open_table
        self._recent: dict[str, list[_Recent]] = {}

    def link(self, rows: list[dict], pending: dict[str, dict], updates: dict[str, dict]) -> None:
        """Set ``follow_up_of`` of ``rows`` (oldest first) and mark the events they follow up as not
        satisfied: in ``pending`` (rows of this batch) or as an update in ``updates``."""
        vectors = self.embedder.encode([row["query"] for row in rows])
        newest = rows[-1]["created_at"]
        # Users idle for longer than the window have nothing left to follow up.
        self._recent = {
            user: recent for user, recent in self._recent.items()
            if recent and newest - recent[-1].created_at <= self.window
        }
        for row, vector in zip(rows, vectors):
            user, now = row["user_id"], row["created_at"]
            if user not in self._recent:
                self._recent[user] = self._stored_recent(user, now)
            recent = [r for r in self._recent[user] if timedelta(0) <= now - r.created_at <= self.window]
            if row["follow_up_of"] is None:
                for earlier in reversed(recent):
                    if float(np.dot(earlier.vector, vector)) > self.similarity:
                        row["follow_up_of"] = earlier.event_id
                        break
            earlier_id = row["follow_up_of"]
            if earlier_id is not None:
                if earlier_id in pending:
                    pending[earlier_id]["satisfied"] = False
                else:
                    updates.setdefault(earlier_id, {})["satisfied"] = False
            recent.append(_Recent(row["event_id"], now, vector))
            self._recent[user] = recent

    def _stored_recent(self, user_id: str, now: datetime) -> list[_Recent]:
        """The user's stored events of the window before ``now``, oldest first, with vectors."""
        try:
            table = self._open_table()
            rows = [] if table is None else (
                table.search()
                .where(f"user_id = {quote(user_id)} AND created_at >= {sql_time(now - self.window)}"
                       f" AND created_at <= {sql_time(now)}")
                .select(["event_id", "query", "created_at"])
                .limit(None)
                .to_arrow()
                .to_pylist()
            )
        except Exception as exc:  # an unreadable store must not stop this batch being written
            log.warning("retrieval events: cannot read earlier events of %r: %r", user_id, exc)
            return []
        if not rows:
            return []
        rows.sort(key=lambda r: r["created_at"])
        vectors = self.embedder.encode([r["query"] for r in rows])
        return [_Recent(r["event_id"], r["created_at"], v) for r, v in zip(rows, vectors)]
