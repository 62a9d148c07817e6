"""The retriever's settings (``config/retrieval.toml``): the variants it knows, the settings it
reads, and their validation."""

from __future__ import annotations

from collections.abc import Mapping

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
    """The setting at ``dotted`` ("hybrid.window"); a clear error when it is missing."""
    node = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise ValueError(f"retrieval.toml: missing setting {dotted!r}")
        node = node[part]
    return node


def validate_config(config: Mapping) -> None:
    """Every setting the retriever reads is present and the choices are known."""
    missing = []
    for dotted in REQUIRED_SETTINGS:
        try:
            option(config, dotted)
        except ValueError:
            missing.append(dotted)
    if missing:
        raise ValueError(f"retrieval.toml: missing settings {missing}")
    for key in ("default_variant", "story_variant"):
        if config[key] not in VARIANTS:
            raise ValueError(f"retrieval.toml: {key} {config[key]!r} not in {list(VARIANTS)}")
    if config["lexical"]["backend"] not in ("bm25s", "lancedb"):
        raise ValueError(
            f"retrieval.toml: lexical.backend {config['lexical']['backend']!r} not in ['bm25s', 'lancedb']"
        )
    temperature = config["learned_scores"]["temperature"]
    if isinstance(temperature, bool) or not isinstance(temperature, int | float) or not temperature > 0:
        raise ValueError(f"retrieval.toml: learned_scores.temperature must be a number > 0, got {temperature!r}")
