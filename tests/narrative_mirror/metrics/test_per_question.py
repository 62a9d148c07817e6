import math

import pytest

from narrative_mirror.metrics import QA_METRIC_KEYS, question_metrics

POSITIONS = {f"m{position:02d}": position for position in range(30)}


def test_all_metrics_of_one_question():
    gold = ["m05", "m12", "m20"]
    # Distinct ranks: m12 1, m01 2, m06 3, m02 4, m03 5, m04 6, m07..m10 7-10, m20 11, m05 12.
    ranked = ["m12", "m01", "m12", "m06", "m02", "m03", "m04", "m07", "m08", "m09", "m10", "m20", "m05"]
    selected = ["m12", "m19", "m00"]
    metrics = question_metrics(ranked, selected, gold, POSITIONS)
    assert list(metrics) == list(QA_METRIC_KEYS)
    assert metrics == pytest.approx(
        {
            "recall@5": 1 / 3,
            "recall@10": 1 / 3,
            "recall@20": 1.0,
            "ndcg@10": 1 / (1 + 1 / math.log2(3) + 1 / 2),
            "mrr@10": 1.0,
            "exact_recall": 1 / 3,
            "fuzzy_recall": 2 / 3,  # m12 exact, m20 via m19; m05 is 5 from m00
            "fuzzy_recall@10": 2 / 3,  # m05 via m04/m06, m12 exact; m20 is 8 from m12
            "precision": 1 / 3,
        },
        abs=1e-12,
    )


def test_fuzzy_at_10_ignores_ranks_after_10():
    ranked = [f"m{position:02d}" for position in range(10)] + ["m21"]
    metrics = question_metrics(ranked, [], ["m20"], POSITIONS)
    assert metrics["fuzzy_recall@10"] == 0.0
    assert metrics["fuzzy_recall"] == 0.0
    assert metrics["precision"] == 0.0


def test_empty_gold_gives_all_none():
    assert question_metrics(["m01"], ["m01"], [], POSITIONS) == dict.fromkeys(QA_METRIC_KEYS)


def test_window_is_passed_to_both_fuzzy_metrics():
    metrics = question_metrics(["m08"], ["m08"], ["m10"], POSITIONS, window=1)
    assert (metrics["fuzzy_recall"], metrics["fuzzy_recall@10"]) == (0.0, 0.0)
