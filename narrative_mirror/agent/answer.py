"""Generator (extractive offline, or LLM) and claim verification.

Every answer is a list of claims, each citing evidence ids. Verification keeps a claim only when
all its ids are in the evidence and most of its content words appear in the cited messages;
anything else goes to Unknowns instead of the answer (seed 002: never fill gaps by guessing).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from narrative_mirror.agent.grading import FacetMatch
from narrative_mirror.agent.text import stems
from narrative_mirror.layers.text import truncate
from narrative_mirror.llm import DATA_BLOCK_NOTICE, LLMClient, MessageId, format_messages_as_data
from narrative_mirror.settings import load_prompt

SUPPORT_MIN = 0.5  # share of a claim's content words that must appear in its cited messages
CLAIM_CHARS = 220
NO_ANSWER = "No message in this chat answers the question."


@dataclass
class EvidenceMessage:
    local_id: str
    position: int
    speaker: str
    text: str
    timestamp: datetime | None
    grade: float
    match: FacetMatch


@dataclass
class Claim:
    text: str
    ids: list[str] = field(default_factory=list)


def _sentences(text: str) -> list[str]:
    parts = [p.strip() for p in re.split(r"(?<=[.!?])\s+", text) if p.strip()]
    return parts or [text.strip()]


def best_sentence(message: EvidenceMessage) -> str:
    """The sentence of the message with the most matched facet terms (the first on ties)."""
    def hits(sentence: str) -> int:
        return len(message.match.artifact_terms & stems(sentence))

    sentences = _sentences(message.text)
    return truncate(max(sentences, key=lambda s: (hits(s), -sentences.index(s))), CLAIM_CHARS)


def _when(ts: datetime | None) -> str:
    return f" on {ts.day} {ts:%b %Y}" if ts else ""


CLAIMS_PER_ROUTE = {"direct": 2, "multi_hop": 3, "global": 5, "oneshot": 5}


def extractive_claims(evidence: Sequence[EvidenceMessage], route: str) -> list[Claim]:
    """Quotes of the best evidence messages, time-ordered for stories.

    Beyond the first quote, a message is quoted only if it adds facet terms not quoted yet,
    so the answer covers different parts of the question rather than repeating one.
    """
    # A question rarely states its own answer: quote statements first.
    usable = sorted((e for e in evidence if e.text.strip()), key=lambda e: best_sentence(e).endswith("?"))
    chosen: list[EvidenceMessage] = []
    covered: set[str] = set()
    for message in usable:
        if len(chosen) >= CLAIMS_PER_ROUTE.get(route, 2):
            break
        if chosen and route != "global" and not (message.match.artifact_terms - covered):
            continue
        chosen.append(message)
        covered |= message.match.artifact_terms
    if route in ("global", "oneshot"):
        chosen.sort(key=lambda e: e.position)
    return [Claim(f'{m.speaker}{_when(m.timestamp)}: "{best_sentence(m)}" [{m.local_id}]', [m.local_id]) for m in chosen]


def support(claim: Claim, cited_texts: Sequence[str]) -> float:
    """Share of the claim's content word stems found in the cited messages (1.0 if it has none)."""
    wanted = stems(re.sub(r"\[[^\]]*\]", " ", claim.text))
    if not wanted:
        return 1.0
    have = set().union(*(stems(t) for t in cited_texts)) if cited_texts else set()
    return len(wanted & have) / len(wanted)


def verify(claims: Sequence[Claim], evidence_text: Mapping[str, str]) -> tuple[list[Claim], list[str]]:
    """(verified claims, reasons for each claim that could not be verified)."""
    verified: list[Claim] = []
    problems: list[str] = []
    for claim in claims:
        unknown_ids = [i for i in claim.ids if i not in evidence_text]
        if not claim.ids:
            problems.append(f"Unverified (cites no evidence): {claim.text}")
        elif unknown_ids:
            problems.append(f"Unverified (cites {unknown_ids}, not in the evidence): {claim.text}")
        elif (share := support(claim, [evidence_text[i] for i in claim.ids])) < SUPPORT_MIN:
            problems.append(f"Unverified (only {share:.0%} of its words are in {claim.ids}): {claim.text}")
        else:
            verified.append(claim)
    return verified, problems


class ClaimReply(BaseModel):
    text: str
    ids: list[MessageId] = []


class GenerateReply(BaseModel):
    answer: str
    claims: list[ClaimReply]
    unknowns: list[Any] = []  # strings kept; anything else is dropped, not fatal


def llm_claims(llm: LLMClient, question: str, evidence: Sequence[EvidenceMessage]) -> tuple[str, list[Claim], list[str]]:
    """(answer, claims, unknowns) written by the LLM from the evidence only."""
    system = load_prompt("agent_generator") + "\n" + DATA_BLOCK_NOTICE
    rows = [(e.local_id, e.speaker, e.text) for e in evidence]
    user = f"Question: {question}\n\nEvidence messages:\n{format_messages_as_data(rows)}"
    reply = llm.complete_json(system, user, GenerateReply)
    claims = [Claim(item.text.strip(), list(item.ids)) for item in reply.claims]
    unknowns = [u for u in reply.unknowns if isinstance(u, str) and u.strip()]
    return reply.answer.strip(), claims, unknowns
