"""Python API: ask a chat a question, ask it for a story (arc), or trace where evidence went.

    from narrative_mirror.query import ask, arc, trace
    answer = ask(retriever, "Chat_1_Emi_Elise", "When did Kate visit Art Basel?")
    answer.answer, answer.selected_ids, answer.trace.final

``retriever`` is a ``narrative_mirror.retrieval.engine.Retriever``; ``llm`` an optional
``narrative_mirror.llm.LLMClient`` (None = the offline path for every step).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, Literal

from narrative_mirror.agent.contract import AgentAnswer, ArcAnswer, DebugTrace
from narrative_mirror.agent.graph import run_agent
from narrative_mirror.agent.oneshot import run_oneshot
from narrative_mirror.agent.profiles import DEFAULT_PROFILE, Profile, get_profile
from narrative_mirror.llm import LLMClient

Mode = Literal["agent", "oneshot"]
MODES = ("agent", "oneshot")


def _check(question: str, mode: str) -> str:
    if not isinstance(question, str) or not question.strip():
        raise ValueError("question: must be a non-empty string")
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: expected one of {list(MODES)}")
    return question.strip()


def _deadline(llm: LLMClient | None, profile: Profile):
    """LLM calls of one answer end within the profile's deadline; past it (or with the LLM's
    circuit open) the agent answers offline and says so (``degraded_reason``)."""
    return llm.deadline(profile.deadline_s) if llm is not None else nullcontext()


def ask(
    retriever: Any,
    chat_file: str,
    question: str,
    profile: str | Profile = DEFAULT_PROFILE,
    llm: LLMClient | None = None,
    mode: Mode = "agent",
    on_step: Callable[[str, list[str]], None] | None = None,
) -> AgentAnswer:
    """Answer, evidence and unknowns for one question about one chat, each evidence item naming
    the chat; ``on_step(node, lines)`` follows the agent's nodes as they finish. Several chats at
    once: ``narrative_mirror.across_chats``."""
    question = _check(question, mode)
    chosen = get_profile(profile)
    with _deadline(llm, chosen):
        if mode == "oneshot":
            answer = run_oneshot(retriever, chat_file, question, chosen, llm)
        else:
            answer = run_agent(retriever, chat_file, question, chosen, llm, task="ask", on_step=on_step)
    # every evidence item names its chat (one shape with answers over several chats)
    return answer.model_copy(
        update={"evidence": [e.model_copy(update={"chat": e.chat or chat_file}) for e in answer.evidence]}
    )


def arc(
    retriever: Any,
    chat_file: str,
    question: str,
    profile: str | Profile = DEFAULT_PROFILE,
    llm: LLMClient | None = None,
) -> ArcAnswer:
    """A story question ("How did X develop?") answered as chronological phases with evidence ids."""
    question = _check(question, "agent")
    chosen = get_profile(profile)
    with _deadline(llm, chosen):
        return run_agent(retriever, chat_file, question, chosen, llm, task="arc")


def trace(
    retriever: Any,
    chat_file: str,
    question: str,
    profile: str | Profile = DEFAULT_PROFILE,
    llm: LLMClient | None = None,
    mode: Mode = "agent",
) -> DebugTrace:
    """The three checkpoints (candidates, after rerank, final selection) of one question."""
    return ask(retriever, chat_file, question, profile, llm, mode).trace
