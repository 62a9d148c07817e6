"""Sessions for chats whose file has none (the exports): a silence gap starts one.

RealTalk and LoCoMo write their sessions; exports are one long stream. A message starts a new
session when the silence before it exceeds ``[sessions] gap_hours`` (layers.toml) or, where the
export has days of its own (Slack's day files), when the day changes. A thread reply (Slack)
stays in its thread's session while that session is still the current one, so a slow thread is
not cut in the middle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import Any

from narrative_mirror.layers.params import SessionParams, section


def session_gap(config: Mapping[str, Any]) -> timedelta:
    return timedelta(hours=section(config, "sessions", SessionParams).gap_hours)


def sessions_by_gap(
    times: Sequence[datetime],
    gap: timedelta,
    *,
    days: Sequence[date] | None = None,
    ids: Sequence[str] | None = None,
    thread_roots: Sequence[str | None] | None = None,
) -> list[int]:
    """Session number (from 1) of each message, in order; ``times`` must be non-decreasing.

    ``days``: the export's own day of each message (a change starts a session); ``ids`` and
    ``thread_roots``: each message's id and the id of its thread's root (None when it is not a
    reply), so that a reply whose root is in the current session stays there.
    """
    numbers: list[int] = []
    in_current: set[str] = set()
    for i, moment in enumerate(times):
        if i == 0:
            number = 1
        else:
            new = moment - times[i - 1] > gap or (days is not None and days[i] != days[i - 1])
            root = thread_roots[i] if thread_roots is not None else None
            if new and not (root is not None and root in in_current):
                number = numbers[-1] + 1
                in_current = set()
            else:
                number = numbers[-1]
        numbers.append(number)
        if ids is not None:
            in_current.add(ids[i])
    return numbers
