"""Word-level helpers of the agent: light stemming, term matching, time phrases, injection cues."""

from __future__ import annotations

import re
from collections.abc import Iterable

from narrative_mirror.layers.text import content_tokens, tokens

MONTHS = (
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
).split()
# "may" alone is usually the verb: it counts as a month only next to a day number or a year.
_BARE_MONTHS = [m for m in MONTHS if m != "may"]
WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday weekend weekends".split()

# Time phrases of a question, longest alternatives first so "new year's eve" wins over "new year".
_TIME_PHRASE = re.compile(
    r"\b(?:(?:in|on|during|after|before|since|until|by|around|at)\s+)?(?:the\s+)?(?:"
    r"(?:first|second|third|last|next|this|past|previous|early|late|mid)\s+(?:week|month|year|weekend|days?)"
    r"(?:\s+of\s+(?:\d{4}|" + "|".join(MONTHS) + r"))?"
    r"|new\s+year'?s?(?:\s+eve)?(?:\s+\d{4})?|christmas(?:\s+eve)?|thanksgiving|easter|valentine'?s?(?:\s+day)?"
    r"|\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:" + "|".join(MONTHS) + r")(?:,?\s+\d{4})?"
    r"|may(?:\s+\d{1,2}(?:st|nd|rd|th)?(?:,?\s+\d{4})?|,?\s+\d{4})"
    r"|(?:" + "|".join(_BARE_MONTHS) + r")(?:\s+\d{1,2}(?:st|nd|rd|th)?)?(?:,?\s+\d{4})?"
    r"|(?:" + "|".join(WEEKDAYS) + r")"
    r"|yesterday|today|tonight|tomorrow|spring|summer|autumn|winter"
    r"|(?:19|20)\d{2}"
    r")\b",
    re.IGNORECASE,
)

# Text that addresses an AI model rather than the other chat participant. Such messages stay
# searchable data, but their wording never becomes the agent's answer.
_INJECTION = re.compile(
    r"ignore\s+(?:all\s+|any\s+)?(?:the\s+)?(?:previous|prior|above|earlier|your)\s+(?:instructions|prompts?|rules)"
    r"|disregard\s+(?:all\s+|the\s+)?(?:previous|prior|above|your)\s"
    r"|system\s+prompt|you\s+are\s+now\s+(?:a|an|in)\b|developer\s+mode"
    r"|\b(?:call|invoke|run|use)\s+(?:the\s+)?tool\b|\btool[_ ]call"
    r"|\bas\s+an\s+ai\b|\b(?:assistant|ai|llm|model)\s*[:,]\s*(?:ignore|answer|respond|say|output|reply)",
    re.IGNORECASE,
)


def stem(token: str) -> str:
    """A crude suffix-stripping stem: enough to match "remedies"/"remedy", "hiking"/"hike"."""
    if token.endswith("'s"):
        token = token[:-2]
    if len(token) > 4 and token.endswith("ies"):
        return token[:-3] + "y"
    plural = token.endswith("s")
    if len(token) - plural > 6 and token.endswith(("tion", "sion", "tions", "sions")):  # "operation(s)" / "operated"
        return token[: -4 if plural else -3]
    for suffix in ("ing", "ed", "es", "s", "e", "d"):
        if token.endswith(suffix) and len(token) - len(suffix) >= 3 and not token.endswith("ss"):
            return token[: -len(suffix)]
    return token


def stems(text: str, exclude: Iterable[str] = ()) -> set[str]:
    """Stems of the content words of ``text``."""
    return {stem(t) for t in content_tokens(text, exclude)}


def time_phrases(text: str) -> list[str]:
    """Time expressions as written, in order ("in the first week of 2024", "on Friday")."""
    return [m.group(0).strip() for m in _TIME_PHRASE.finditer(text)]


def time_words(text: str) -> set[str]:
    """Lower-case words that belong to time expressions of ``text``."""
    return {w for phrase in time_phrases(text) for w in tokens(phrase)}


def looks_like_injection(text: str) -> bool:
    """True when the text speaks to an AI model (instructions, tool calls, role changes)."""
    return bool(_INJECTION.search(text))
