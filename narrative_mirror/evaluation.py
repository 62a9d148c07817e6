"""Runs the query pipeline over gold questions and ARC cases and scores it.

Per-question rows keep everything needed to trace a figure back: the ranked and selected ids,
gold ids, every metric, latency, where each missed gold id was lost, and the config
fingerprint the run was made under.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import polars as pl

from narrative_mirror import settings
from narrative_mirror.citation_confidence import CitedMessage, independently_supported
from narrative_mirror.metrics import QA_METRIC_KEYS, arc_case_metrics, attribute_losses, question_metrics, summarize
from narrative_mirror.metrics.answer_contains import answer_contains
from narrative_mirror.metrics.answer_f1 import answer_f1, answer_tokens
from narrative_mirror.metrics.unknowns_when_needed import unknowns_when_needed

STAGES = ("never_candidate", "ranked_too_low", "dropped_at_selection")
ARC_KEYS = {
    "global_recall": "arc_global_recall",
    "phase_coverage": "arc_phase_coverage",
    "phase_order": "arc_phase_order",
}
RERANK_TOP = 10
ANSWER_KEYS = ("answer_f1", "answer_contains", "answer_words")
HEADLINE_KEYS = (
    "recall@5",
    "recall@10",
    "recall@20",
    "ndcg@10",
    "mrr@10",
    "fuzzy_recall@10",
    "exact_recall",
    "precision",
    "answer_f1",
    "answer_contains",
)  # "ranked too low" = a candidate that did not reach the top 10 after rerank


def load_eval_config(profile: str | None = None) -> dict:
    """config/evaluation.toml; ``profile`` overrides its agent profile (the CLI's --profile)."""
    cfg = settings.load_config("evaluation")
    if profile:
        cfg.setdefault("run", {})["profile"] = profile
    for section, keys in {
        "run": ("profile", "mode"),
        "regression": ("metric", "error_drop", "warn_drop", "floor", "arc_floor"),
        "adoption_gate": ("supported_claim_rate", "claim_gold_citation_precision"),
    }.items():
        for key in keys:
            if key not in cfg.get(section, {}):
                raise ValueError(f"{settings.config_path('evaluation')}: [{section}] {key} is missing")
    regression = cfg["regression"]
    headline = regression["metric"]  # first: the checks report its figures
    regression["metrics"] = [headline, *(m for m in regression.get("metrics", []) if m != headline)]
    for metric, limits in regression.get("per_metric", {}).items():
        unknown = set(limits) - {"warn_drop", "error_drop", "floor"}
        if unknown or metric not in regression["metrics"]:
            raise ValueError(
                f"{settings.config_path('evaluation')}: [regression.per_metric] {metric}: "
                + (f"unknown keys {sorted(unknown)}" if unknown else "not in [regression] metrics")
            )
    return cfg


def tolerance(regression: Mapping[str, Any], metric: str) -> dict[str, float]:
    """``metric``'s warn_drop, error_drop and floor: its [regression.per_metric] entry over the
    section's defaults (the ARC metric's floor is ``arc_floor``)."""
    floor = regression["arc_floor"] if metric == regression.get("arc_metric") else regression["floor"]
    base = {"warn_drop": regression["warn_drop"], "error_drop": regression["error_drop"], "floor": floor}
    return {**base, **regression.get("per_metric", {}).get(metric, {})}


# What an evaluation reads besides the data and the index: the config files and prompts its asset
# depends on in the asset graph (assets/evaluation/assets.py), nothing more, so a change Dagster
# leaves the evaluations fresh for (a summary prompt, layers.toml) does not make them outdated.
EVAL_CONFIGS = ("retrieval", "agent", "evaluation")
EVAL_PROMPT_PREFIX = "agent_"
# Only arc mode segments a story into phases, so only the ARC evaluation reads this prompt.
ARC_ONLY_PROMPTS = ("agent_segment",)


def prompts_read(assets: Iterable[str]) -> list[str]:
    """The agent prompts the evaluation ``assets`` read (qa_eval and profile_protocol every agent
    prompt but the arc-only ones; arc_eval all of them)."""
    names = [n for n in settings.prompt_names() if n.startswith(EVAL_PROMPT_PREFIX)]
    return names if "arc_eval" in assets else [n for n in names if n not in ARC_ONLY_PROMPTS]


def config_fingerprint(
    embedder: str, llm: str | None, profile: str, mode: str, code_versions: Mapping[str, str]
) -> dict[str, str]:
    """The parts an evaluation's figures depend on besides the data, and their hash
    (``fingerprint``): models, profile and mode, each config file and agent prompt the
    evaluations read, and the code version of each evaluation asset in ``code_versions``.

    LanceDB table versions are recorded separately (they move whenever any chat is re-indexed,
    so they cannot decide whether a partition's figures are current).
    """
    parts = {
        "embedder": embedder,
        "llm": llm or "offline",
        "profile": profile,
        "mode": mode,
        **{f"{name}.toml": settings.file_hash(settings.config_path(name))[:12] for name in EVAL_CONFIGS},
        **{
            f"prompts/{name}.txt": settings.file_hash(settings.prompt_path(name))[:12]
            for name in prompts_read(code_versions)
        },
        **{f"code:{asset}": version[:12] for asset, version in sorted(code_versions.items())},
    }
    parts["fingerprint"] = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]
    return parts


def settings_snapshot() -> dict[str, Any]:
    """Every setting of the config files an evaluation reads, flattened to one value per
    ``"<file>.toml [section] key"`` (nested tables joined with dots), as written in the experiment log."""
    flat: dict[str, Any] = {}

    def walk(prefix: str, table: Mapping[str, Any], section: str) -> None:
        for key, value in table.items():
            if isinstance(value, Mapping):
                walk(prefix, value, f"{section}.{key}" if section else key)
            else:
                flat[f"{prefix} [{section}] {key}" if section else f"{prefix} {key}"] = value

    for name in EVAL_CONFIGS:
        walk(f"{name}.toml", settings.load_config(name), "")
    return flat


def changed_settings(previous: Mapping[str, Any], current: Mapping[str, Any], file: str) -> list[str]:
    """The settings of ``file`` (``"retrieval.toml"``) that differ: ``"retrieval.toml [fusion]
    rrf_k: 60 -> 40"``, ``... (added): 3``, ``... (removed)``."""
    names = sorted(k for k in set(previous) | set(current) if k.startswith(f"{file} "))
    out = []
    for name in names:
        if name not in previous:
            out.append(f"{name} (added): {current[name]!r}")
        elif name not in current:
            out.append(f"{name} (removed, was {previous[name]!r})")
        elif previous[name] != current[name]:
            out.append(f"{name}: {previous[name]!r} -> {current[name]!r}")
    return out


def changed_parts(previous: Mapping[str, str] | None, current: Mapping[str, str]) -> list[str]:
    """Every part that differs between two fingerprints (added and removed parts too), by name:
    ``retrieval.toml``, ``prompts/agent_planner.txt``, ``code:qa_eval`` (that asset's code moved)."""
    if not previous:
        return ["(first experiment)"]
    names = (set(previous) | set(current)) - {"fingerprint"}
    return sorted(k for k in names if previous.get(k) != current.get(k))


def evaluate_qa(
    answer: Callable[[str], Any],
    gold_qa: pl.DataFrame,
    messages: pl.DataFrame,
    fingerprint: str,
    progress: Callable[[int, int], None] | None = None,
) -> pl.DataFrame:
    """One row per gold question. ``answer(question)`` returns an AgentAnswer."""
    positions = dict(zip(messages["local_id"].to_list(), messages["position"].to_list()))
    rows = []
    total = gold_qa.height
    for i, q in enumerate(gold_qa.iter_rows(named=True), 1):
        started = time.perf_counter()
        result = answer(q["question"])
        latency_ms = (time.perf_counter() - started) * 1000
        ranked, selected = result.ranked_ids, result.selected_ids
        metrics = question_metrics(ranked, selected, q["gold_ids"], positions)
        stages = attribute_losses(q["gold_ids"], [c.id for c in result.trace.candidates], ranked[:RERANK_TOP], selected)
        rows.append(
            {
                "question_id": q["question_id"],
                "chat_file": q["chat_file"],
                "category": q["category"],
                "question": q["question"],
                "ranked_ids": ranked,
                "selected_ids": selected,
                "gold_ids": q["gold_ids"],
                **metrics,
                "answer": result.answer,
                "gold_answer": q["answer"],
                **_answer_scores(result, q),
                "answer_words": float(len(answer_tokens(result.answer))),
                **_claim_counts(result, q["gold_ids"]),
                **_search_kpis(result, ranked, q["gold_ids"]),
                "latency_ms": latency_ms,
                **{f"lost_{s}": [g for g, st in stages.items() if st == s] for s in STAGES},
                "route": result.route,
                "degraded": result.degraded,
                "fingerprint": fingerprint,
            }
        )
        if progress:
            progress(i, total)
    return pl.DataFrame(rows, schema=QA_ROW_SCHEMA)


def _answer_scores(result: Any, q: Mapping[str, Any]) -> dict[str, float]:
    """Token F1 and containment against the gold answer; an unanswerable question (LoCoMo's
    category 5, whose "answer" is the bait) scores 1 when the answer abstains, as LoCoMo does."""
    if q["category"] == UNANSWERABLE_CATEGORY:
        return dict.fromkeys(("answer_f1", "answer_contains"), float(result.abstained))
    return {
        "answer_f1": answer_f1(result.answer, q["answer"]),
        "answer_contains": answer_contains(result.answer, q["answer"]),
    }


def _claim_counts(result: Any, gold_ids: list[str]) -> dict[str, Any]:
    """What the answer KPIs are made of, for one answer."""
    supported = [c for c in result.claims if c.supported]
    evidence = {
        e.id: CitedMessage(e.text.removeprefix(f"{e.speaker}: ") if e.speaker else e.text, e.timestamp, e.speaker)
        for e in getattr(result, "evidence", ())
    }
    return {
        "claims": len(result.claims),
        "supported_claims": len(supported),
        # the same claims checked again by other means than the answerer's verifier
        "independently_supported_claims": sum(
            independently_supported(
                c.text, getattr(result, "question", ""), [evidence[i] for i in c.ids if i in evidence]
            )
            for c in supported
        ),
        "claims_citing_gold": sum(bool(set(c.ids) & set(gold_ids)) for c in supported),
        "abstained": result.abstained,
        "corrective": result.rounds > 1,
        "llm_calls": result.llm_calls,
        "verifier": result.verifier,
    }


def _search_kpis(result: Any, ranked: list[str], gold_ids: list[str]) -> dict[str, Any]:
    """The agentic-RAG design's search KPIs of one answer: how much of the top 5 / top 10 is gold evidence, the
    agent's own grade of its top 5 (its grader: an LLM when configured), its tool calls, and
    whether its last coverage check found the must-have evidence its profile asks for."""
    from narrative_mirror.agent.profiles import profiles

    gold = set(gold_ids)
    profile = profiles().get(result.profile)
    must_have = result.coverage.get("must_have_hits")
    return {
        **{f"top{k}_gold_share": (len(set(ranked[:k]) & gold) / k if gold else None) for k in (5, 10)},
        "top5_graded_relevance": result.coverage.get("top5_relevance"),
        "tool_calls": result.calls,
        "must_have_met": bool(profile and must_have is not None and must_have >= profile.min_must_have_hits),
    }


def answer_kpis(rows: pl.DataFrame) -> dict[str, float | None]:
    """The agentic-RAG design's answer KPIs over evaluated questions (ratios of sums where they count claims)."""

    def ratio(part: str, whole: str) -> float | None:
        total = rows[whole].sum() if rows.height else 0
        return round(float(rows[part].sum()) / total, 6) if total else None

    def mean(column: str) -> float | None:
        values = rows[column].drop_nulls() if rows.height else rows[column]
        return float(values.mean()) if values.len() else None

    unanswerable = rows.filter(pl.col("category") == UNANSWERABLE_CATEGORY)
    corrective = rows.filter(pl.col("corrective"))
    return {
        "supported_claim_rate": ratio("supported_claims", "claims"),
        # the agentic-RAG design: graded by a check that is not the answerer's own
        # (citation_confidence.INDEPENDENT_CHECK)
        "supported_claim_rate_lexical_check": ratio("independently_supported_claims", "claims"),
        # A gold-id proxy of citation precision: supported claims citing at least one gold id.
        "claim_gold_citation_precision": ratio("claims_citing_gold", "supported_claims"),
        "top5_gold_share": mean("top5_gold_share"),
        "top10_gold_share": mean("top10_gold_share"),
        "top5_graded_relevance": mean("top5_graded_relevance"),
        # The corrective loop fired and the agent then found the must-have evidence.
        "ambiguity_resolution_rate": float(corrective["must_have_met"].mean()) if corrective.height else None,
        "mean_tool_calls": mean("tool_calls"),
        "unknown_rate": float(rows["abstained"].mean()) if rows.height else None,
        # an abstention is right when no gold evidence exists or none was retrieved (metrics.unknowns_when_needed)
        **unknowns_when_needed(
            list(zip(rows["abstained"].to_list(), rows["gold_ids"].to_list(), rows["ranked_ids"].to_list()))
            if rows.height
            else []
        ),
        "abstention_accuracy": float(unanswerable["abstained"].mean()) if unanswerable.height else None,
        "corrective_trigger_rate": float(rows["corrective"].mean()) if rows.height else None,
        "mean_llm_calls": float(rows["llm_calls"].mean()) if rows.height else None,
        "p95_latency_ms": float(rows["latency_ms"].quantile(0.95)) if rows.height else None,
    }


UNANSWERABLE_CATEGORY = 5  # LoCoMo's adversarial questions: the chat does not answer them
KPI_KEYS = (
    "supported_claim_rate",
    "supported_claim_rate_lexical_check",
    "claim_gold_citation_precision",
    "top5_gold_share",
    "top10_gold_share",
    "top5_graded_relevance",
    "ambiguity_resolution_rate",
    "mean_tool_calls",
    "unknown_rate",
    "unknowns_when_needed",
    "unknowns_when_not_needed",
    "abstention_decision_accuracy",
    "abstention_accuracy",
    "corrective_trigger_rate",
    "mean_llm_calls",
    "p95_latency_ms",
)


QA_ROW_SCHEMA = {
    "question_id": pl.String,
    "chat_file": pl.String,
    "category": pl.Int64,
    "question": pl.String,
    "ranked_ids": pl.List(pl.String),
    "selected_ids": pl.List(pl.String),
    "gold_ids": pl.List(pl.String),
    **{k: pl.Float64 for k in QA_METRIC_KEYS},
    "answer": pl.String,
    "gold_answer": pl.String,
    **{k: pl.Float64 for k in ANSWER_KEYS},
    "claims": pl.Int64,
    "supported_claims": pl.Int64,
    "independently_supported_claims": pl.Int64,
    "claims_citing_gold": pl.Int64,
    "abstained": pl.Boolean,
    "corrective": pl.Boolean,
    "llm_calls": pl.Int64,
    "verifier": pl.String,
    "top5_gold_share": pl.Float64,
    "top10_gold_share": pl.Float64,
    "top5_graded_relevance": pl.Float64,
    "tool_calls": pl.Int64,
    "must_have_met": pl.Boolean,
    "latency_ms": pl.Float64,
    **{f"lost_{s}": pl.List(pl.String) for s in STAGES},
    "route": pl.String,
    "degraded": pl.Boolean,
    "fingerprint": pl.String,
}


def evaluate_arcs(arc: Callable[[str], Any], arc_cases: pl.DataFrame, fingerprint: str) -> pl.DataFrame:
    """One row per ARC case: global recall, phase coverage, phase-order agreement."""
    rows = []
    for case in arc_cases.iter_rows(named=True):
        started = time.perf_counter()
        result = arc(case["query"])
        latency_ms = (time.perf_counter() - started) * 1000
        predicted = [p.evidence for p in result.phases]
        metrics = arc_case_metrics(case["phase_evidence"], predicted)
        rows.append(
            {
                "case_id": case["case_id"],
                "chat_file": case["chat_file"],
                "query": case["query"],
                "gold_phases": len(case["phase_evidence"]),
                "predicted_phases": len(predicted),
                "predicted_ids": [i for p in predicted for i in p],
                **{ARC_KEYS[k]: v for k, v in metrics.items()},
                "latency_ms": latency_ms,
                "fingerprint": fingerprint,
            }
        )
    return pl.DataFrame(rows, schema=ARC_ROW_SCHEMA)


ARC_ROW_SCHEMA = {
    "case_id": pl.String,
    "chat_file": pl.String,
    "query": pl.String,
    "gold_phases": pl.Int64,
    "predicted_phases": pl.Int64,
    "predicted_ids": pl.List(pl.String),
    **{v: pl.Float64 for v in ARC_KEYS.values()},
    "latency_ms": pl.Float64,
    "fingerprint": pl.String,
}


def qa_summary(rows: pl.DataFrame) -> dict[str, Any]:
    """Headline metrics overall and per category, plus loss-stage counts."""
    keys = [*QA_METRIC_KEYS, *ANSWER_KEYS]
    summary = summarize(rows.select(["category", *keys]).to_dicts(), by="category", metrics=keys)
    summary["overall"].update(answer_kpis(rows))
    for category, stats in summary["groups"].items():
        stats.update(answer_kpis(rows.filter(pl.col("category") == category)))
    summary["lost"] = {s: int(rows[f"lost_{s}"].list.len().sum() or 0) for s in STAGES}
    return summary


def arc_summary(rows: pl.DataFrame) -> dict[str, Any]:
    return summarize(rows.select(list(ARC_KEYS.values())).to_dicts(), by=None, metrics=list(ARC_KEYS.values()))


def category_table(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rows for a per-category table: overall first, then each category."""
    out = []
    for name, stats in [("all", summary["overall"]), *summary["groups"].items()]:
        out.append({"category": str(name), "questions": stats["count"], **{k: stats[k] for k in HEADLINE_KEYS}})
    return out


def markdown_table(rows: list[Mapping[str, Any]]) -> str:
    if not rows:
        return "(no rows)"
    cols: list[str] = []
    for row in rows:
        cols += [c for c in row if c not in cols]
    fmt = lambda v: f"{v:.3f}" if isinstance(v, float) else ("–" if v is None else str(v))  # noqa: E731
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines)
