"""Labels and summaries for topic blocks and threads: offline extractive, or by an LLM.

Both summarizers answer ``summarize(kind, items) -> (label, summary)``:
- ``kind="block"``: ``items`` are the block's messages as ``"speaker: text"`` lines, in order;
- ``kind="thread"``: ``items`` are the thread's blocks (one line each: label and summary), in
  time order; the returned label is the thread title.

``LLMSummarizer`` sends the items as a data block (``llm.format_messages_as_data``) under the
versioned prompt ``prompts/{kind}_summary.txt`` plus ``llm.DATA_BLOCK_NOTICE``. When the LLM
fails (``LLMError``) or answers with an empty field it falls back to the extractive result and
counts it in ``fallbacks`` (``last_error`` keeps the reason), so callers can report how many
summaries are extractive.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import BaseModel

from narrative_mirror import settings
from narrative_mirror.layers.params import SummaryParams, section
from narrative_mirror.layers.text import content_tokens, truncate
from narrative_mirror.safe_text import terminal_safe

if TYPE_CHECKING:
    from narrative_mirror.llm import LLMClient

Kind = Literal["block", "thread"]
KINDS: tuple[Kind, ...] = ("block", "thread")

log = logging.getLogger(__name__)


class Summarizer(Protocol):
    def summarize(self, kind: Kind, items: list[str]) -> tuple[str, str]: ...


def split_speaker(item: str) -> tuple[str, str]:
    """``"speaker: text"`` -> (speaker, text); ("", item) when there is no speaker prefix."""
    speaker, sep, text = item.partition(": ")
    if not sep or not speaker or len(speaker) > 40:
        return "", item
    return speaker, text


def central_summary(items: Sequence[str], centrality: Sequence[float], params: SummaryParams) -> str:
    """The ``summary_items`` most central items (ties: earlier first), in their original order,
    each cut to ``item_max_chars``, joined by " … "."""
    ranked = sorted(range(len(items)), key=lambda i: (-centrality[i], i))[: params.summary_items]
    parts = [truncate(items[i], params.item_max_chars) for i in sorted(ranked)]
    return truncate(" … ".join(parts), params.summary_max_chars)


def _check(kind: str, items: list[str]) -> None:
    if kind not in KINDS:
        raise ValueError(f"summarize: kind must be one of {KINDS}, got {kind!r}")
    if not items:
        raise ValueError(f"summarize({kind!r}): no items to summarize")


class ExtractiveSummarizer:
    """Label = the terms shared by most items; summary = the items sharing most terms with the
    others. Needs no vectors, so it also serves as the LLM fallback."""

    def __init__(self, params: SummaryParams | None = None) -> None:
        self.params = params or section(settings.load_config("layers"), "summary", SummaryParams)

    def summarize(self, kind: Kind, items: list[str]) -> tuple[str, str]:
        _check(kind, items)
        # Block lines start with the speaker, whose name would otherwise top every label.
        texts = [split_speaker(item)[1] for item in items] if kind == "block" else list(items)
        term_sets = [set(content_tokens(text)) for text in texts]
        doc_freq = Counter(term for terms in term_sets for term in terms)
        total = Counter(term for text in texts for term in content_tokens(text))
        terms = sorted(doc_freq, key=lambda t: (-doc_freq[t], -total[t], t))
        label = ", ".join(terms[: self.params.label_terms])
        # Centrality: how many other items share each term, damped for long items.
        centrality = [sum(doc_freq[t] - 1 for t in ts) / math.sqrt(len(ts)) if ts else 0.0 for ts in term_sets]
        summary = central_summary(items, centrality, self.params)
        return truncate(label, self.params.label_max_chars) or truncate(items[0], self.params.label_max_chars), summary


class SummaryReply(BaseModel):
    label: str
    summary: str


class LLMSummarizer:
    """Summaries from an ``llm.LLMClient``; extractive fallback on any LLM failure."""

    def __init__(self, client: LLMClient, fallback: ExtractiveSummarizer | None = None) -> None:
        self.client = client
        self.fallback = fallback or ExtractiveSummarizer()
        self.params = self.fallback.params
        self.calls = 0
        self.fallbacks = 0
        self.last_error: str | None = None

    def summarize(self, kind: Kind, items: list[str]) -> tuple[str, str]:
        # Imported here: the offline path never needs the openai client.
        from narrative_mirror.llm import DATA_BLOCK_NOTICE, LLMError, format_messages_as_data

        _check(kind, items)
        system = settings.load_prompt(f"{kind}_summary").strip() + "\n\n" + DATA_BLOCK_NOTICE
        rows = []
        for index, item in enumerate(items, start=1):
            speaker, text = split_speaker(item) if kind == "block" else ("", item)
            rows.append((str(index), speaker, truncate(text, self.params.prompt_item_max_chars)))
        self.calls += 1
        try:
            answer = self.client.complete_json(system, format_messages_as_data(rows), SummaryReply)
            label = truncate(answer.label, self.params.label_max_chars)
            summary = truncate(answer.summary, self.params.summary_max_chars)
            if not label or not summary:
                raise LLMError("malformed", f"empty label or summary in {answer!r:.200}")
        except LLMError as exc:
            self.fallbacks += 1
            self.last_error = str(exc)
            # The error may quote the LLM's reply or the chat text it was sent: logged as visible escapes.
            log.warning("%s summary: extractive fallback after %s", kind, terminal_safe(exc))
            return self.fallback.summarize(kind, items)
        return label, summary
