"""The retriever's settings (``config/retrieval.toml``): the variants it knows, the settings it
reads, and their validation."""

from __future__ import annotations

from collections.abc import Mapping

from narrative_mirror.config_check import config_error, setting_at, typed

FILE = "retrieval.toml"

VARIANTS = (
    "bm25",
    "dense",
    "hybrid",
    "hybrid_learned",
    "hybrid_expand",
    "hybrid_expand_rerank",
    "dual_path",
    "iterative",
)

REQUIRED_SETTINGS = (
    "default_variant",
    "story_variant",
    "rrf_k",
    "candidates",
    "lexical.backend",
    "lexical.stem",
    *(
        f"hybrid.{k}"
        for k in (
            "w_bm25",
            "w_dense",
            "window",
            "w_bm25_window",
            "w_dense_window",
            "w_block",
            "w_block_bm25",
            "w_thread",
            "w_speaker",
            "w_time",
            "time_slack_hours",
            "strip_person_names",
        )
    ),
    *(f"expand.{k}" for k in ("seeds", "before", "after", "decay", "block_decay")),
    *(f"tree.{k}" for k in ("anchors", "k_global", "density_threshold", "exploit_weights", "explore_weights")),
    "rerank.reranker",
    "learned_scores.temperature",
    "across_chats.gate_temperature",
    "across_chats.name_weight",
)


def option(config: Mapping, dotted: str):
    """The setting at ``dotted`` ("hybrid.window"); the error naming it when it is missing."""
    return setting_at(FILE, config, dotted)


def validate_config(config: Mapping) -> None:
    """Every setting the retriever reads is present and the choices are known."""
    for dotted in REQUIRED_SETTINGS:
        option(config, dotted)
    for key in ("default_variant", "story_variant"):
        if config[key] not in VARIANTS:
            raise config_error(FILE, key, f"{config[key]!r} not in {list(VARIANTS)}")
    if config["lexical"]["backend"] not in ("bm25s", "lancedb"):
        raise config_error(FILE, "lexical.backend", f"{config['lexical']['backend']!r} not in ['bm25s', 'lancedb']")
    if not typed(FILE, "learned_scores.temperature", config["learned_scores"]["temperature"], float) > 0:
        raise config_error(FILE, "learned_scores.temperature", "must be > 0")
