"""The API's questions over several chats: a request's globs expanded within the chats its token
may read, the merged search with its retrieval event, and the ask of one chat or several as the
service's pools run it (``narrative_mirror.multi_chat`` does the work)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from api.requests import ApiError, SearchQuery
from narrative_mirror.agent.contract import AgentAnswer
from narrative_mirror.events.record import VARIANT_METHODS, RetrievalEvent, approx_tokens, tenant_user
from narrative_mirror.logged_query import ask_logged
from narrative_mirror.multi_chat import MergedSearch, NoChatMatches, ask_chats_logged, search_chats, searched_label, \
    select_chats
from narrative_mirror.recall_runs import RecordedSearch, recorded_search


def select_readable(chats: str | list[str], available: Iterable[str], readable: Callable[[str], bool]) -> list[str]:
    """``select_chats`` within the ``readable`` chats of ``available``; a glob matching none of
    them is a 404 naming the glob (the same answer whether chats outside the token would match)."""
    try:
        return select_chats(chats, available, readable)
    except NoChatMatches as exc:
        raise ApiError(404, "chats", f"no chat you may read matches {exc.pattern!r}") from None


def ask_logged_chats(retriever: Any, chats: tuple[str, ...], question: str, profile: str, llm: Any, mode: str,
                     event_log: Any, user_id: str, session_id: str | None) -> tuple[AgentAnswer, str]:
    """``ask_logged`` of one chat, ``ask_chats_logged`` of several."""
    if len(chats) == 1:
        return ask_logged(retriever, chats[0], question, profile, llm, mode, event_log, user_id, session_id)
    return ask_chats_logged(retriever, chats, question, profile, llm, mode, event_log, user_id, session_id)


def ask_by_chats(ends: float, retriever: Any, chats: tuple[str, ...], question: str, profile: str, llm: Any,
                 *args: Any) -> tuple[AgentAnswer, str]:
    """``ask_logged_chats`` whose LLM calls end by ``ends`` (time.monotonic), as ``bulkhead.ask_by``."""
    with llm.deadline(max(0.0, ends - time.monotonic())):
        return ask_logged_chats(retriever, chats, question, profile, llm, *args)


def search_several(retriever: Any, event_log: Any, chats: tuple[str, ...], params: SearchQuery, arrival: float,
                   namespace: str | None, runs_root: Path | None) -> tuple[MergedSearch, str]:
    """Each chat's recorded search (``recall_runs.recorded_search``, one run record per chat), merged
    into the ``k`` best (``multi_chat.search_chats``), and one retrieval event naming the chats
    searched; (the merged search, its event id)."""
    def one(chat: str) -> RecordedSearch:
        return recorded_search(retriever, chat, params.q, params.k, need_fresh=params.need_fresh,
                               half_life_days=params.halflife_days, fresh_weight=params.fresh_weight,
                               self_rag=params.self_rag, root=runs_root, variant=params.variant)

    merged = search_chats(retriever, list(chats), params.q, params.k, search=one,
                          hits_of=lambda recorded: recorded.result.hits,
                          info_of=lambda recorded: recorded.result.query_info)
    variant = next(iter(merged.results.values())).params["variant"]
    found = Counter(h.chat for h in merged.hits)
    event_id = event_log.log(RetrievalEvent(
        user_id=tenant_user(namespace, params.user_id), session_id=params.session_id, chat_file=searched_label(chats),
        query=params.q, returned_ids=[h.message_id for h in merged.hits], method=VARIANT_METHODS[variant],
        counts_per_source={f"chat:{chat}": found[chat] for chat in chats},
        latency_ms=(time.monotonic() - arrival) * 1000, tokens_in_context=approx_tokens([h.hit.text for h in merged.hits]),
    ))
    return merged, event_id
