"""Whether the gold answer appears whole in the answer (after answer_f1's normalization)."""

from __future__ import annotations

from narrative_mirror.metrics.answer_f1 import answer_tokens


def answer_contains(prediction: str, gold: str) -> float | None:
    """1.0 when the gold answer's tokens occur in the answer as one run, else 0.0; None when the
    gold answer is empty."""
    gold_tokens, predicted = answer_tokens(gold), answer_tokens(prediction)
    if not gold_tokens:
        return None
    n = len(gold_tokens)
    return float(any(predicted[i : i + n] == gold_tokens for i in range(len(predicted) - n + 1)))
