"""Follow-up linking: a query whose embedding has cosine > ``similarity`` (0.7 by default) with an
earlier query of the SAME user within the window (10 minutes by default) gets ``follow_up_of`` =
the most recent such event, and that earlier event is marked ``satisfied = False``.

The work per event is bounded: it compares with at most ``max_recent`` earlier queries of the
user (the newest), keeps at most ``max_users`` users in memory (least recently active dropped: a
client names its user ids, and each kept user holds up to ``max_recent`` vectors, ~30 MB in all),
and encodes each distinct query text once (``max_cached_vectors`` kept). Earlier queries come from
memory, or from the table for a user this process has not seen yet (a CLI run per question still
links follow-ups). ``EventLog``'s writer thread calls ``link``.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, deque
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

    def __init__(
        self,
        embedder: Embedder,
        window: timedelta,
        similarity: float,
        open_table: Callable[[], Any],
        *,
        max_recent: int = 20,
        max_users: int = 1000,
        max_cached_vectors: int = 4096,
    ):
        if max_recent < 1 or max_users < 1 or max_cached_vectors < 1:
            raise ValueError("FollowUpLinker: max_recent, max_users and max_cached_vectors must be >= 1")
        self.embedder = embedder
        self.window = window
        self.similarity = similarity
        self.max_recent, self.max_users, self.max_cached_vectors = max_recent, max_users, max_cached_vectors
        self._open_table = open_table
        self._recent: OrderedDict[str, deque[_Recent]] = OrderedDict()  # least recently active first
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()  # query text -> embedding (LRU)
        self.encoded = 0  # query texts encoded so far (what the cache saves shows here)

    def vectors(self, texts: list[str]) -> list[np.ndarray]:
        """Embeddings of ``texts``, encoding only those not cached."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            for text, vector in zip(missing, self.embedder.encode(missing)):
                self._vectors[text] = vector
            self.encoded += len(missing)
        out = []
        for text in texts:
            self._vectors.move_to_end(text)
            out.append(self._vectors[text])
        while len(self._vectors) > self.max_cached_vectors:
            self._vectors.popitem(last=False)
        return out

    def link(self, rows: list[dict], pending: dict[str, dict], updates: dict[str, dict]) -> None:
        """Set ``follow_up_of`` of ``rows`` (oldest first) and mark the events they follow up as not
        satisfied: in ``pending`` (rows of this batch) or as an update in ``updates``."""
        vectors = self.vectors([row["query"] for row in rows])
        for row, vector in zip(rows, vectors):
            user, now = row["user_id"], row["created_at"]
            if user not in self._recent:
                self._recent[user] = deque(self._stored_recent(user, now), maxlen=self.max_recent)
            self._recent.move_to_end(user)
            recent = self._recent[user]
            if row["follow_up_of"] is None:
                for earlier in reversed(recent):
                    if (
                        timedelta(0) <= now - earlier.created_at <= self.window
                        and float(np.dot(earlier.vector, vector)) > self.similarity
                    ):
                        row["follow_up_of"] = earlier.event_id
                        break
            earlier_id = row["follow_up_of"]
            if earlier_id is not None:
                if earlier_id in pending:
                    pending[earlier_id]["satisfied"] = False
                else:
                    updates.setdefault(earlier_id, {})["satisfied"] = False
            recent.append(_Recent(row["event_id"], now, vector))
        newest = rows[-1]["created_at"]
        # Users idle for longer than the window have nothing left to follow up; the rest is capped.
        for user in [u for u, r in self._recent.items() if not r or newest - r[-1].created_at > self.window]:
            del self._recent[user]
        while len(self._recent) > self.max_users:
            self._recent.popitem(last=False)

    def _stored_recent(self, user_id: str, now: datetime) -> list[_Recent]:
        """The user's newest ``max_recent`` stored events of the window before ``now``, oldest
        first, with vectors."""
        try:
            table = self._open_table()
            rows = (
                []
                if table is None
                else (
                    table.search()
                    .where(
                        f"user_id = {quote(user_id)} AND created_at >= {sql_time(now - self.window)}"
                        f" AND created_at <= {sql_time(now)}"
                    )
                    .select(["event_id", "query", "created_at"])
                    .limit(None)
                    .to_arrow()
                    .to_pylist()
                )
            )
        except Exception as exc:  # an unreadable store must not stop this batch being written
            log.warning("retrieval events: cannot read earlier events of %r: %r", user_id, exc)
            return []
        rows = sorted(rows, key=lambda r: r["created_at"])[-self.max_recent :]
        vectors = self.vectors([r["query"] for r in rows])
        return [_Recent(r["event_id"], r["created_at"], v) for r, v in zip(rows, vectors)]
