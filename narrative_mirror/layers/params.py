"""Typed, validated parameters of the layers, read from ``layers.toml`` (``settings.load_config("layers")``).

Every layer function takes the whole config mapping and reads its own section, so callers load
the file once and pass it everywhere. A missing, unknown or ill-typed key is an error naming the
section and key; the packaged layers.toml documents each value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from narrative_mirror import config_check

FILE = "layers.toml"

P = TypeVar("P")


@dataclasses.dataclass(frozen=True)
class SummaryParams:
    label_terms: int
    summary_items: int
    item_max_chars: int
    label_max_chars: int
    summary_max_chars: int
    prompt_item_max_chars: int


@dataclasses.dataclass(frozen=True)
class L1Params:
    window: int
    depth_threshold: float
    time_gap_minutes: float
    min_block_messages: int
    max_block_messages: int
    keywords: int


@dataclasses.dataclass(frozen=True)
class L15Params:
    long_message_tokens: int
    min_content_tokens: int
    strong_sentiment: float
    common_entity_block_share: float
    refs_saturation: int
    max_ref_blocks: int


@dataclasses.dataclass(frozen=True)
class L2Params:
    link_threshold: float
    entity_weight: float
    min_sessions: int
    max_entities: int


@dataclasses.dataclass(frozen=True)
class SessionParams:
    gap_hours: float


def section(config: Mapping[str, Any], name: str, cls: type[P]) -> P:
    """Section ``[name]`` of the layers config as ``cls``, type- and range-checked."""
    fields = {f.name: {"int": int, "float": float}[f.type] for f in dataclasses.fields(cls)}
    parsed = config_check.section(FILE, name, config.get(name), fields, closed=True)
    for key, value in parsed.items():
        if value < 0:
            raise config_check.config_error(FILE, f"{name}.{key}", f"must be >= 0, got {value!r}")
    params = cls(**parsed)
    _check_ranges(params, name)
    return params


def _check_ranges(params: Any, name: str) -> None:
    problems = []
    if isinstance(params, L1Params):
        if params.window < 1:
            problems.append("window must be >= 1")
        if not 1 <= params.min_block_messages <= params.max_block_messages:
            problems.append("need 1 <= min_block_messages <= max_block_messages")
    if isinstance(params, L15Params):
        if params.refs_saturation < 1:
            problems.append("refs_saturation must be >= 1")
        if params.common_entity_block_share > 1:
            problems.append("common_entity_block_share must be <= 1")
    if isinstance(params, L2Params) and params.min_sessions < 1:
        problems.append("min_sessions must be >= 1")
    if isinstance(params, SessionParams) and params.gap_hours <= 0:
        problems.append("gap_hours must be > 0")
    if isinstance(params, SummaryParams):
        if min(params.item_max_chars, params.label_max_chars, params.summary_max_chars) < 10:
            problems.append("*_max_chars must be >= 10")
        if params.summary_items < 1:
            problems.append("summary_items must be >= 1")
    if problems:
        raise config_check.config_error(FILE, name, "; ".join(problems))
