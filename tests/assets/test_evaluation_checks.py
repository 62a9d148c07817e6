"""The evaluation checks as functions (assets/evaluation/checks.py): every guarded metric is
compared with the baseline under its own tolerances from evaluation.toml."""

import dagster as dg
import pytest

from assets.evaluation.baseline import Baseline
from assets.evaluation.checks import adoption_gate_check, floor_check, regression_check
from narrative_mirror import settings
from narrative_mirror.evaluation import load_eval_config

METRICS = ["recall@10", "exact_recall", "precision"]
BASELINE = Baseline({"recall@10": 0.70, "exact_recall": 0.55, "precision": 0.45}, 1, "run0abcdef", "pinned")


def test_guarded_metrics_and_tolerances_come_from_the_config():
    cfg = load_eval_config()
    assert cfg["regression"]["metrics"] == METRICS
    assert cfg["regression"]["per_metric"]["exact_recall"]["warn_drop"] == 0.03


def test_exact_recall_falling_alone_fails_while_recall_at_10_holds():
    cfg = load_eval_config()
    check = regression_check(
        "qa_recall_regression",
        "qa_eval",
        METRICS,
        {"recall@10": 0.71, "exact_recall": 0.40, "precision": 0.45},
        BASELINE,
        cfg,
    )
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    assert "exact_recall 0.550 -> 0.400 (drop +0.150" in check.description
    assert check.metadata["drop"].value == -0.01 and check.metadata["drop/exact_recall"].value == 0.15


def test_each_metric_has_its_own_warn_tolerance():
    cfg = load_eval_config()
    # precision drops .025: within its own .03, beyond the default .02 that recall@10 keeps.
    within = regression_check(
        "qa_recall_regression",
        "qa_eval",
        METRICS,
        {"recall@10": 0.70, "exact_recall": 0.55, "precision": 0.425},
        BASELINE,
        cfg,
    )
    assert within.passed
    beyond = regression_check(
        "qa_recall_regression",
        "qa_eval",
        METRICS,
        {"recall@10": 0.675, "exact_recall": 0.55, "precision": 0.45},
        BASELINE,
        cfg,
    )
    assert not beyond.passed and beyond.severity == dg.AssetCheckSeverity.WARN


def test_no_baseline_passes_and_floors_name_the_metric_under_them():
    cfg = load_eval_config()
    first = regression_check("qa_recall_regression", "qa_eval", METRICS, {"recall@10": 0.1}, None, cfg)
    assert first.passed and "no baseline of this chat file yet" in first.description
    low = floor_check("qa_recall_floor", "qa_eval", METRICS, {"recall@10": 0.1, "exact_recall": 0.0}, cfg)
    assert not low.passed and low.metadata["under_floor"].value == ["recall@10"]
    assert low.description == "recall@10 = 0.1 (floor 0.2)"


def test_the_adoption_gate_comes_from_evaluation_toml(tmp_path, monkeypatch):
    row = {
        "profile": "balanced",
        "supported_claim_rate": 0.92,
        "claim_gold_citation_precision": 0.96,
        "p95_latency_ms": 100.0,
    }
    assert adoption_gate_check([row]).passed
    text = (settings.DEFAULT_CONFIG_DIR / "evaluation.toml").read_text(encoding="utf-8")
    stricter = text.replace("supported_claim_rate = 0.90", "supported_claim_rate = 0.95")
    assert stricter != text
    (tmp_path / "evaluation.toml").write_text(stricter, encoding="utf-8")
    monkeypatch.setenv("NM_CONFIG_DIR", str(tmp_path))
    check = adoption_gate_check([row])
    assert not check.passed and "supported_claim_rate 0.92 < 0.95" in check.description
    (tmp_path / "evaluation.toml").write_text(text.replace("supported_claim_rate = 0.90\n", ""), encoding="utf-8")
    with pytest.raises(ValueError, match=r"\[adoption_gate\] supported_claim_rate is missing"):
        adoption_gate_check([row])
