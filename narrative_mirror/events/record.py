"""The retrieval event record: ``RetrievalEvent`` with its field checks, the stored row's schema,
the retriever-variant -> method map and ``approx_tokens``.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pyarrow as pa

METHODS = ("semantic", "keyword", "hybrid", "tree", "pinned")
# Retriever variant -> event method.
VARIANT_METHODS = {
    "bm25": "keyword",
    "dense": "semantic",
    "hybrid": "hybrid",
    "hybrid_learned": "hybrid",
    "hybrid_expand": "hybrid",
    "hybrid_expand_rerank": "hybrid",
    "dual_path": "tree",
    "iterative": "hybrid",  # the tree-retrieval design's loop over the hybrid variant
}
MAX_ID_CHARS = 200
# A stored user_id is "<namespace>/<client's user id>": the namespace is the API token's name
# (token names hold no "/"), or OPEN_NAMESPACE for the open API, so no two tenants share a user.
OPEN_NAMESPACE = "local"
MAX_NAMESPACE_CHARS = 64
MAX_USER_CHARS = MAX_NAMESPACE_CHARS + 1 + MAX_ID_CHARS

EVENT_SCHEMA = pa.schema(
    [
        ("event_id", pa.string()),
        ("user_id", pa.string()),
        ("session_id", pa.string()),
        ("chat_file", pa.string()),
        ("query", pa.string()),
        ("returned_ids", pa.list_(pa.string())),
        ("method", pa.string()),
        ("threshold", pa.float64()),
        ("counts_per_source", pa.string()),  # JSON object: source -> count
        ("cited_ids", pa.list_(pa.string())),
        ("citation_confidence", pa.float64()),  # null until citations are known, and when nothing is cited
        ("follow_up_of", pa.string()),
        ("satisfied", pa.bool_()),  # null = unknown, False = the user asked again
        ("latency_ms", pa.float64()),
        ("tokens_in_context", pa.int64()),
        ("created_at", pa.timestamp("us", tz="UTC")),
        ("cited_confidences", pa.list_(pa.float64())),  # per cited id, in cited_ids order
        ("query_vector", pa.list_(pa.float32())),  # the query's embedding (null: not encoded)
    ]
)
# Columns a table written before they existed lacks: added (all null) when it is next written.
ADDED_COLUMNS = ("cited_confidences", "query_vector")


def approx_tokens(texts: Sequence[str]) -> int:
    """Rough token count of texts put in context: ~4 characters per token (English)."""
    return sum(math.ceil(len(t) / 4) for t in texts)


def tenant_user(namespace: str | None, client_user: str) -> str:
    """The stored user id of ``client_user`` asking with the token named ``namespace`` (None: the
    open API). The client picks only the part after the first "/", never another tenant's prefix."""
    namespace = OPEN_NAMESPACE if namespace is None else namespace
    if not namespace or "/" in namespace or len(namespace) > MAX_NAMESPACE_CHARS:
        raise ValueError(
            f"retrieval event: a user namespace must be 1-{MAX_NAMESPACE_CHARS} characters without "
            f"'/', got {namespace!r}"
        )
    return f"{namespace}/{client_user}"


def check_id(value: object, name: str, optional: bool = False, max_chars: int = MAX_ID_CHARS) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str) or not value or len(value) > max_chars:
        raise ValueError(f"retrieval event: {name} must be a non-empty string of <= {max_chars} chars, got {value!r}")


def check_ids(values: object, name: str) -> None:
    if not isinstance(values, list | tuple) or not all(isinstance(v, str) for v in values):
        raise ValueError(f"retrieval event: {name} must be a list of strings, got {values!r}")


def check_unit(value: object, name: str) -> None:
    if value is not None and not (isinstance(value, int | float) and 0.0 <= value <= 1.0):
        raise ValueError(f"retrieval event: {name} must be null or in [0, 1], got {value!r}")


def check_confidences(values: object, cited: Sequence[str]) -> None:
    """Per-cited-id confidences: none (not graded) or one in [0, 1] per cited id."""
    if not isinstance(values, list | tuple) or (values and len(values) != len(cited)):
        raise ValueError(
            f"retrieval event: cited_confidences must be empty or one per cited id ({len(cited)}), got {values!r}"
        )
    for value in values:
        check_unit(value, "cited_confidences")
        if value is None:
            raise ValueError("retrieval event: cited_confidences holds null")


@dataclass
class RetrievalEvent:
    """One retrieval. ``cited_ids`` / ``citation_confidence`` may be filled later (``mark_cited``)."""

    user_id: str
    chat_file: str
    query: str
    returned_ids: list[str]
    method: str
    session_id: str | None = None
    threshold: float | None = None
    counts_per_source: dict[str, int] = field(default_factory=dict)
    cited_ids: list[str] = field(default_factory=list)
    citation_confidence: float | None = None
    cited_confidences: list[float] = field(default_factory=list)  # per cited id; empty: not graded
    query_vector: list[float] | None = None
    follow_up_of: str | None = None  # set by follow-up detection unless given
    latency_ms: float = 0.0
    tokens_in_context: int = 0
    event_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def __post_init__(self) -> None:
        check_id(self.user_id, "user_id", max_chars=MAX_USER_CHARS)
        check_id(self.session_id, "session_id", optional=True)
        check_id(self.chat_file, "chat_file")
        check_id(self.event_id, "event_id")
        check_id(self.follow_up_of, "follow_up_of", optional=True)
        if not isinstance(self.query, str):
            raise ValueError(f"retrieval event: query must be a string, got {type(self.query).__name__}")
        check_ids(self.returned_ids, "returned_ids")
        check_ids(self.cited_ids, "cited_ids")
        if self.method not in METHODS:
            raise ValueError(f"retrieval event: method {self.method!r} not in {list(METHODS)}")
        if self.threshold is not None and not (
            isinstance(self.threshold, int | float) and math.isfinite(self.threshold)
        ):
            raise ValueError(f"retrieval event: threshold must be null or a finite number, got {self.threshold!r}")
        if not isinstance(self.counts_per_source, Mapping) or not all(
            isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in self.counts_per_source.items()
        ):
            raise ValueError(
                f"retrieval event: counts_per_source must map names to counts >= 0, got {self.counts_per_source!r}"
            )
        check_unit(self.citation_confidence, "citation_confidence")
        check_confidences(self.cited_confidences, self.cited_ids)
        if self.query_vector is not None and not (
            isinstance(self.query_vector, list | tuple) and all(math.isfinite(v) for v in self.query_vector)
        ):
            raise ValueError("retrieval event: query_vector must be null or a list of finite numbers")
        if not isinstance(self.latency_ms, int | float) or not self.latency_ms >= 0:
            raise ValueError(f"retrieval event: latency_ms must be >= 0, got {self.latency_ms!r}")
        if not isinstance(self.tokens_in_context, int) or self.tokens_in_context < 0:
            raise ValueError(f"retrieval event: tokens_in_context must be an int >= 0, got {self.tokens_in_context!r}")
        if not isinstance(self.created_at, datetime) or self.created_at.tzinfo is None:
            raise ValueError(f"retrieval event: created_at must be a timezone-aware datetime, got {self.created_at!r}")

    def row(self) -> dict:
        return {
            "event_id": self.event_id,
            "user_id": self.user_id,
            "session_id": self.session_id,
            "chat_file": self.chat_file,
            "query": self.query,
            "returned_ids": list(self.returned_ids),
            "method": self.method,
            "threshold": None if self.threshold is None else float(self.threshold),
            "counts_per_source": json.dumps(dict(self.counts_per_source), sort_keys=True),
            "cited_ids": list(self.cited_ids),
            "citation_confidence": None if self.citation_confidence is None else float(self.citation_confidence),
            "follow_up_of": self.follow_up_of,
            "satisfied": None,
            "latency_ms": float(self.latency_ms),
            "tokens_in_context": self.tokens_in_context,
            "created_at": self.created_at.astimezone(UTC),
            "cited_confidences": [float(c) for c in self.cited_confidences],
            "query_vector": None if self.query_vector is None else [float(v) for v in self.query_vector],
        }
