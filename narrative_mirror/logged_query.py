"""Answering with a retrieval event: what was returned, what the answer cited, how long it took.

The HTTP API and the CLI both answer through ``ask_logged`` so every query leaves one
``retrieval_events`` row. Logging never breaks the answer (``EventLog.log`` only queues).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from narrative_mirror.agent.contract import AgentAnswer
from narrative_mirror.agent.profiles import Profile, get_profile
from narrative_mirror.citation_confidence import CitedMessage, answer_citations
from narrative_mirror.events.record import VARIANT_METHODS, RetrievalEvent, approx_tokens
from narrative_mirror.events.writer import EventLog
from narrative_mirror.query import ask

DEFAULT_USER = "anonymous"


def query_vector(retriever, question: str) -> list[float] | None:
    """The question's embedding as the event stores it (None for a retriever without an embedder)."""
    embedder = getattr(retriever, "embedder", None)
    return None if embedder is None else [float(v) for v in embedder.encode([question])[0]]


def search_settings(retriever, profile: str | Profile) -> dict:
    """The event's ``method`` and ``threshold`` as this ask used them: the variant searched (the
    retriever's default when the ask ran) and the profile's coverage threshold."""
    return {"method": VARIANT_METHODS[retriever.default_variant], "threshold": get_profile(profile).min_top5_relevance}


def ask_logged(
    retriever,
    chat_file: str,
    question: str,
    profile: str | Profile,
    llm,
    mode: str,
    event_log: EventLog,
    user_id: str = DEFAULT_USER,
    session_id: str | None = None,
) -> tuple[AgentAnswer, str]:
    started = time.perf_counter()
    settings = search_settings(retriever, profile)
    answer = ask(retriever, chat_file, question, profile, llm, mode)
    returned = answer.ranked_ids
    texts = [h.text for h in retriever.messages(chat_file, returned)]

    def read(ids: Sequence[str]) -> dict[str, CitedMessage]:
        return {h.local_id: CitedMessage(h.text, h.timestamp, h.speaker) for h in retriever.messages(chat_file, ids)}

    cited, per_id, confidence = answer_citations(
        answer, dict(zip(returned, texts)), read, getattr(retriever, "embedder", None)
    )
    event_id = event_log.log(
        RetrievalEvent(
            user_id=user_id,
            session_id=session_id,
            chat_file=chat_file,
            query=question,
            returned_ids=returned,
            counts_per_source={"search": len(returned)},
            cited_ids=cited,
            citation_confidence=confidence,
            cited_confidences=per_id,
            query_vector=query_vector(retriever, question),
            latency_ms=(time.perf_counter() - started) * 1000,
            tokens_in_context=approx_tokens(texts),
            **settings,
        )
    )
    return answer, event_id
