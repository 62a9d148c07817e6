"""Learned fusion: a linear listwise model re-scores the hybrid candidate pool.

The hybrid variant fuses its ranked lists with hand-set RRF weights. This model sees more
than ranks (raw BM25 and cosine scores, the scores of a message's neighbours, message
shape and L1.5 signals) and learns one weight per feature from the TRAIN chats' gold
evidence with a listwise loss: per question, the softmax over its candidate pool should put
its mass on the gold messages (mean cross-entropy + L2, minimized with L-BFGS). A listwise
loss, unlike a per-candidate classifier, only compares candidates of the same question, so
how hard a question is never leaks into the weights.

The weights live in retrieval.toml ``[learned]`` (written by benchmarks/train_fusion.py), so
retraining re-evaluates like any other retrieval setting.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from narrative_mirror import settings
from narrative_mirror.embedding import vector_settings

# One line each: what the feature measures for a candidate message.
FEATURES = {
    "rr_bm25": "reciprocal rank 1/(rrf_k + rank) in the BM25 list (0 when not in it)",
    "rr_dense": "reciprocal rank in the message-vector cosine list",
    "rr_bm25_window": "reciprocal rank in the window-text BM25 list",
    "rr_dense_window": "reciprocal rank in the window-vector cosine list",
    "rr_block_bm25": "reciprocal rank in the block BM25 list",
    "rr_speaker": "reciprocal rank in the named-speaker list",
    "rr_time": "reciprocal rank in the time-window list",
    "fused": "hybrid RRF score",
    "fused_prev": "hybrid RRF score of the previous message",
    "fused_next": "hybrid RRF score of the next message",
    "pool_rank": "1/sqrt(rank in the hybrid pool)",
    "bm25": "BM25 score / the question's best BM25 score",
    "bm25_window": "window BM25 score / the question's best",
    "cosine": "cosine of message and question vectors",
    "cosine_window": "cosine of the window mean vector and the question vector",
    "cosine_near1": "best cosine of the messages 1 away in the same session",
    "cosine_near2": "best cosine of the messages 1-2 away in the same session",
    "bm25_near1": "best BM25 (normalized) of the messages 1 away in the same session",
    "bm25_near2": "best BM25 (normalized) of the messages 1-2 away in the same session",
    "speaker_named": "1 when the question names the message's speaker",
    "log_words": "log(1 + words in the message)",
    "is_question": "1 when the message asks something ('?')",
    "after_question": "1 when the previous message asks something (answers carry facts)",
    "first_person": "1 when the message speaks of its writer (I, my, we: L1.5's pattern), unless the question asks for a fact slot",
    "tier": "L1.5 importance tier (0..3)",
    "refs": "L1.5 reference strength to earlier blocks (0..1)",
    "temporal": "1 when the message has a temporal expression (L1.5)",
    "when_x_temporal": "temporal, for when-questions only",
}


# Questions asking for a place, time, person or count want the fact, whoever states it; the others
# (what, yes/no, how, why) are mostly about a person's activities, opinions and preferences, which
# they say of themselves. Leave-one-chat-out on the 7 train chats, R@10: no first-person feature
# .703; first_person for every question .716; for all but these types .718 (category 1 .589).
FACT_SLOT_TYPES = frozenset({"where", "when", "who", "how_many"})


def inputs_fingerprint(config: Mapping) -> str:
    """What the features are computed from: the retrieval settings the candidate lists use, the
    feature set, and the embedding and layer settings (cosines, L1.5 signals). A model fitted on
    other inputs is stale: retrieval.toml ``[learned].inputs`` records the value at training."""
    parts = {
        "retrieval": {key: config.get(key) for key in ("rrf_k", "candidates", "lexical", "hybrid")},
        "features": list(FEATURES),
        # the embedder's settings; the adaptation's only when it is on (off, vectors are the shipped model's)
        "embedding": vector_settings(settings.load_config("embedding")),
        # the layer settings the features read: [sessions] applies only to chats without sessions
        # (exports, live chats), never to the chat files the model is fitted on
        "layers": {k: v for k, v in settings.load_config("layers").items() if k != "sessions"},
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class LearnedFusion:
    """score = ((x - mean) / scale) . weights over the features in ``features`` order."""

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray

    def score(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.mean) / self.scale) @ self.weights

    @classmethod
    def from_config(cls, section: Mapping) -> LearnedFusion:
        """From retrieval.toml ``[learned]``; a malformed section is an error naming the key."""
        for key in ("features", "mean", "scale", "weights"):
            if key not in section:
                raise ValueError(f"retrieval.toml [learned]: missing {key!r} (run benchmarks/train_fusion.py --write)")
        features = tuple(section["features"])
        unknown = [f for f in features if f not in FEATURES]
        if unknown:
            raise ValueError(f"retrieval.toml [learned].features: unknown features {unknown}")
        arrays = {k: np.asarray(section[k], dtype=np.float64) for k in ("mean", "scale", "weights")}
        for key, values in arrays.items():
            if values.shape != (len(features),):
                raise ValueError(f"retrieval.toml [learned].{key}: {values.size} values for {len(features)} features")
        if (arrays["scale"] <= 0).any():
            raise ValueError("retrieval.toml [learned].scale: values must be > 0")
        return cls(features, arrays["mean"], arrays["scale"], arrays["weights"])

    def to_config(self) -> dict:
        return {
            "features": list(self.features),
            "mean": [round(float(v), 6) for v in self.mean],
            "scale": [round(float(v), 6) for v in self.scale],
            "weights": [round(float(v), 6) for v in self.weights],
        }


def listwise_loss(
    weights: np.ndarray, z: np.ndarray, labels: np.ndarray, groups: Sequence[np.ndarray], l2: float
) -> tuple[float, np.ndarray]:
    """Mean over questions of the cross-entropy between the gold distribution (uniform over the
    question's gold candidates) and the softmax of its candidates' scores, plus ``l2 * |w|^2``;
    and its gradient. ``groups``: row indexes of each question (each with >= 1 gold row)."""
    scores = z @ weights
    loss, grad = 0.0, np.zeros_like(weights)
    for rows in groups:
        s = scores[rows]
        shifted = s - s.max()
        log_p = shifted - np.log(np.exp(shifted).sum())
        target = labels[rows] / labels[rows].sum()
        loss -= float(target @ log_p)
        grad += z[rows].T @ (np.exp(log_p) - target)
    n = max(len(groups), 1)
    return loss / n + l2 * float(weights @ weights), grad / n + 2 * l2 * weights


def fit_listwise(
    x: np.ndarray, labels: np.ndarray, question: np.ndarray, features: Sequence[str], l2: float = 1e-3
) -> LearnedFusion:
    """Weights minimizing ``listwise_loss`` over standardized features. ``question``: the
    question index of each row; questions with no gold row in their pool teach nothing and
    are left out."""
    from scipy.optimize import minimize

    if x.shape != (labels.size, len(features)) or question.shape != labels.shape:
        raise ValueError(
            f"fit_listwise: x {x.shape}, labels {labels.shape}, question {question.shape}, "
            f"{len(features)} features do not match"
        )
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0  # a constant feature gets weight 0 through L2
    z = (x - mean) / scale
    order = np.argsort(question, kind="stable")
    bounds = np.flatnonzero(np.diff(question[order])) + 1
    groups = [rows for rows in np.split(order, bounds) if labels[rows].sum() > 0]
    if not groups:
        raise ValueError("fit_listwise: no question has a gold candidate in its pool")
    result = minimize(
        listwise_loss,
        np.zeros(len(features)),
        args=(z, labels.astype(np.float64), groups, l2),
        jac=True,
        method="L-BFGS-B",
    )
    return LearnedFusion(tuple(features), mean, scale, result.x)


def neighbour_max(values: np.ndarray, sessions: np.ndarray, distance: int) -> np.ndarray:
    """Per row, the largest value of the rows exactly ``distance`` away in the same session (0 if none)."""
    out = np.zeros_like(values, dtype=np.float64)
    if distance >= values.size:
        return out
    same = sessions[distance:] == sessions[:-distance]
    out[:-distance] = np.where(same, values[distance:], 0.0)
    out[distance:] = np.maximum(out[distance:], np.where(same, values[:-distance], 0.0))
    return out


def neighbour_max_at(value_at, sessions: np.ndarray, rows: np.ndarray, distance: int) -> np.ndarray:
    """``neighbour_max(values, sessions, distance)[rows]`` reading only the values of the rows'
    neighbours: ``value_at(indices)`` gives ``values[indices]``. Same results, also at the chat's
    ends (a row with no row ``distance`` after it starts from 0 before its earlier neighbour)."""
    size = sessions.shape[0]
    rows = np.asarray(rows, dtype=np.int64)
    if distance >= size or rows.size == 0:
        return np.zeros(rows.size)
    has_next = rows < size - distance
    after = np.where(has_next, rows + distance, rows)
    same = has_next & (sessions[after] == sessions[rows])
    out = np.where(has_next, np.where(same, value_at(after), 0.0), 0.0).astype(np.float64)
    has_prev = rows >= distance
    before = np.where(has_prev, rows - distance, rows)
    same = has_prev & (sessions[before] == sessions[rows])
    return np.where(has_prev, np.maximum(out, np.where(same, value_at(before), 0.0)), out)
