"""The API's questions over several chats: a request's globs expanded within the chats its token
may read, the merged search with its retrieval event, and the ask of one chat or several as the
service's pools run it (``Memory`` does the work)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from api.requests import ApiError, SearchQuery
from narrative_mirror.across_chats import MergedSearch, NoChatMatches, searched_label
from narrative_mirror.agent.contract import AgentAnswer
from narrative_mirror.events.record import VARIANT_METHODS, RetrievalEvent, approx_tokens, tenant_user
from narrative_mirror.front_door import Memory


def select_readable(chats: str | list[str], available: Iterable[str], readable: Callable[[str], bool]) -> list[str]:
    """``select_chats`` within the ``readable`` chats of ``available``; a glob matching none of
    them is a 404 naming the glob (the same answer whether chats outside the token would match)."""
    try:
        return Memory.select(chats, available, readable)
    except NoChatMatches as exc:
        raise ApiError(404, "chats", f"no chat you may read matches {exc.pattern!r}") from None


def ask_logged_chats(
    memory: Any, chats: tuple[str, ...], question: str, profile: str, mode: str, user_id: str, session_id: str | None
) -> tuple[AgentAnswer, str]:
    """``Memory.ask`` of one chat or several, as the service's pools run it."""
    return tuple(memory.ask(chats, question, profile, mode=mode, user_id=user_id, session_id=session_id))


def ask_by_chats(ends: float, memory: Any, *args: Any) -> tuple[AgentAnswer, str]:
    """``ask_logged_chats`` whose LLM calls end by ``ends`` (time.monotonic): the request's deadline,
    not the profile's default, so a hung LLM holds a worker no longer than the request waits for it."""
    with memory.llm.deadline(max(0.0, ends - time.monotonic())):
        return ask_logged_chats(memory, *args)


def search_several(
    memory: Any,
    chats: tuple[str, ...],
    params: SearchQuery,
    arrival: float,
    namespace: str | None,
    runs_root: Path | None,
) -> tuple[MergedSearch, str]:
    """Each chat's recorded search (one run record per chat), merged into the ``k`` best
    (``Memory.search``), and one retrieval event naming the chats searched; (the merged search,
    its event id)."""
    merged = memory.search(list(chats), params.q, params.k, **params.ranking(), root=runs_root)
    variant = next(iter(merged.results.values())).params["variant"]
    found = Counter(h.chat for h in merged.hits)
    event_id = memory.event_log.log(
        RetrievalEvent(
            user_id=tenant_user(namespace, params.user_id),
            session_id=params.session_id,
            chat_file=searched_label(chats),
            query=params.q,
            returned_ids=[h.message_id for h in merged.hits],
            method=VARIANT_METHODS[variant],
            counts_per_source={f"chat:{chat}": found[chat] for chat in chats},
            latency_ms=(time.monotonic() - arrival) * 1000,
            tokens_in_context=approx_tokens([h.hit.text for h in merged.hits]),
        )
    )
    return merged, event_id
