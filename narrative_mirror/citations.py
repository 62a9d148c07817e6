"""Which returned messages an answer actually used (the retrieval-events design's citation detection).

Two sources of truth, best first:
- the agent's evidence ids (its output contract names the messages it relied on): taken as
  they are; with the claims that cite them, confidence = the mean over claims of the share of
  each claim's words (stopwords aside) found in its best cited message (``claim_support``): a
  claim quoted from its message scores 1, a claim its message does not bear out scores low;
- otherwise a heuristic over the answer text. A message counts as cited when the first 50
  characters of one of its sentence chunks (> 20 characters, lower-cased, whitespace collapsed)
  occur in the answer, or, failing that, when at least ``MIN_SHARED`` of its content words and
  at least ``OVERLAP_CITED`` of them appear in the answer.

Confidence = how clear the signal is, averaged over the returned messages: 1 for a substring
match, and for the overlap test the distance from its threshold (an overlap of 0 or 1 is a
clear no / yes, an overlap right at the threshold is a coin toss).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from narrative_mirror.layers.text import STOPWORDS, content_tokens, tokens

MIN_CHUNK_CHARS = 20  # the retrieval-events design: shorter chunks match too easily to mean anything
CHUNK_PREFIX_CHARS = 50
OVERLAP_CITED = 0.6  # share of a message's content words that must appear in the answer
MIN_SHARED = 3  # and at least this many of them: two shared words are a coincidence

_SENTENCE_END = re.compile(r"[.!?]+")
_SPACE = re.compile(r"\s+")


def _normalize(text: str) -> str:
    return _SPACE.sub(" ", text.lower().replace("\u2019", "'")).strip()


def _chunks(text: str) -> list[str]:
    return [_normalize(c) for c in _SENTENCE_END.split(text) if len(c.strip()) > MIN_CHUNK_CHARS]


def _overlap(message: str, answer_words: set[str]) -> tuple[float, int]:
    words = set(content_tokens(message))
    if not words:
        return 0.0, 0
    shared = len(words & answer_words)
    return shared / len(words), shared


def _words(text: str) -> set[str]:
    return {t for t in tokens(text.replace("\u2019", "'")) if t not in STOPWORDS}


def claim_support(claim: str, cited_texts: Sequence[str]) -> float:
    """Share of ``claim``'s words (stopwords aside, numbers kept) found in the best of its cited
    messages; 0 when it has no such word or cites no message we can read."""
    words = _words(claim)
    if not words or not cited_texts:
        return 0.0
    return max(len(words & _words(text)) / len(words) for text in cited_texts)


def detect_citations(
    answer_text: str,
    returned: Sequence[tuple[str, str]],
    evidence_ids: Sequence[str] | None = None,
    claims: Sequence[tuple[str, Sequence[str]]] | None = None,
    texts: Mapping[str, str] | None = None,
) -> tuple[list[str], float]:
    """(cited ids, confidence in [0, 1]) for an answer built from ``returned`` (id, text) pairs.

    ``evidence_ids`` (the agent contract's evidence) wins when given, even if empty: the agent
    said what it used. Its confidence is read from ``claims`` ((claim text, cited ids) pairs;
    message texts from ``returned`` and ``texts``), the retrieval-events design: the mean ``claim_support``; no
    claim (nothing cited) is a clear signal, 1. Cited ids keep the order of ``evidence_ids`` / ``returned``.
    """
    if not isinstance(answer_text, str):
        raise TypeError(f"answer_text: expected a string, got {type(answer_text).__name__}")
    if evidence_ids is not None:
        cited_ids = list(dict.fromkeys(evidence_ids))
        if not claims:
            return cited_ids, 1.0
        known = {**dict(returned), **(texts or {})}
        support = [claim_support(text, [known[i] for i in ids if i in known]) for text, ids in claims]
        return cited_ids, sum(support) / len(support)
    if not returned:
        return [], 1.0
    answer = _normalize(answer_text)
    answer_words = set(content_tokens(answer_text))
    cited: list[str] = []
    clarity = 0.0
    for message_id, text in returned:
        if any(chunk[:CHUNK_PREFIX_CHARS] in answer for chunk in _chunks(text)):
            cited.append(message_id)
            clarity += 1.0
            continue
        share, shared = _overlap(text, answer_words)
        if share >= OVERLAP_CITED and shared >= MIN_SHARED:
            cited.append(message_id)
            clarity += (share - OVERLAP_CITED) / (1.0 - OVERLAP_CITED)
        else:
            clarity += (OVERLAP_CITED - share) / OVERLAP_CITED if share < OVERLAP_CITED else 0.0
    return list(dict.fromkeys(cited)), clarity / len(returned)
