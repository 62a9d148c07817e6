"""Answering with a retrieval event: what was returned, what the answer cited, how long it took.

The HTTP API and the CLI both answer through ``ask_logged`` so every query leaves one
``retrieval_events`` row. Logging never breaks the answer (``EventLog.log`` only queues).
"""

from __future__ import annotations

import time

from narrative_mirror.agent.contract import AgentAnswer
from narrative_mirror.agent.profiles import PROFILES
from narrative_mirror.citations import detect_citations
from narrative_mirror.events.record import VARIANT_METHODS, RetrievalEvent, approx_tokens
from narrative_mirror.events.writer import EventLog
from narrative_mirror.query import ask

DEFAULT_USER = "anonymous"


def ask_logged(retriever, chat_file: str, question: str, profile: str, llm, mode: str, event_log: EventLog,
               user_id: str = DEFAULT_USER, session_id: str | None = None) -> tuple[AgentAnswer, str]:
    started = time.perf_counter()
    answer = ask(retriever, chat_file, question, profile, llm, mode)
    returned = answer.ranked_ids
    texts = [h.text for h in retriever.messages(chat_file, returned)]
    # What the final answer cites: the ids of its verified claims (none when it abstained); an answer
    # without claims (the one-shot path) is read for citations instead (seed 001's heuristic).
    supported = [c for c in answer.claims if c.supported]
    claim_ids = list(dict.fromkeys(i for c in supported for i in c.ids)) if answer.claims else None
    outside = [i for i in claim_ids or () if i not in returned]
    cited, confidence = detect_citations(
        answer.answer, list(zip(returned, texts)), claim_ids, claims=[(c.text, c.ids) for c in supported],
        texts={h.local_id: h.text for h in retriever.messages(chat_file, outside)} if outside else None)
    event_id = event_log.log(RetrievalEvent(
        user_id=user_id, session_id=session_id, chat_file=chat_file, query=question, returned_ids=returned,
        method=VARIANT_METHODS[retriever.default_variant], threshold=PROFILES[profile].min_top5_relevance,
        counts_per_source={"search": len(returned)}, cited_ids=cited, citation_confidence=confidence,
        latency_ms=(time.perf_counter() - started) * 1000, tokens_in_context=approx_tokens(texts),
    ))
    return answer, event_id
