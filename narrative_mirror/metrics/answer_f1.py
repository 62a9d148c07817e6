"""Token F1 of an answer against the gold answer, as the LoCoMo paper scores QA (SQuAD-style
normalization: lower case, punctuation and the articles a/an/the removed, whitespace split)."""

from __future__ import annotations

import re
import string
from collections import Counter

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans({c: " " for c in string.punctuation + "\u2018\u2019\u201c\u201d"})


def answer_tokens(text: str) -> list[str]:
    """The normalized tokens of an answer."""
    return _ARTICLES.sub(" ", str(text).lower().translate(_PUNCTUATION)).split()


def answer_f1(prediction: str, gold: str) -> float | None:
    """Harmonic mean of token precision and recall; None when the gold answer is empty."""
    gold_tokens, predicted = answer_tokens(gold), answer_tokens(prediction)
    if not gold_tokens:
        return None
    shared = sum((Counter(predicted) & Counter(gold_tokens)).values())
    if not shared:
        return 0.0
    precision, recall = shared / len(predicted), shared / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)
