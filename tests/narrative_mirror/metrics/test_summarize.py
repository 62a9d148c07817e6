import pytest

from narrative_mirror.metrics import question_metrics, summarize

ROWS = [
    {"question_id": "q1", "category": 2, "recall@5": 0.0, "precision": 0.5},
    {"question_id": "q2", "category": 1, "recall@5": 1.0, "precision": 0.5},
    {"question_id": "q3", "category": 1, "recall@5": 0.5, "precision": 0.25},
    {"question_id": "q4", "category": 2, "recall@5": None, "precision": None},  # no resolvable gold
]


def test_means_overall_and_per_category_leave_out_none():
    assert summarize(ROWS) == {
        "overall": {"count": 4, "excluded": 1, "recall@5": 0.5, "precision": 0.625 / 1.5},
        "groups": {
            1: {"count": 2, "excluded": 0, "recall@5": 0.75, "precision": 0.375},
            2: {"count": 2, "excluded": 1, "recall@5": 0.0, "precision": 0.5},
        },
    }
    assert list(summarize(ROWS)["groups"]) == [1, 2]


def test_no_grouping_and_explicit_metrics():
    summary = summarize(ROWS, by=None, metrics=["precision"])
    assert summary == {"overall": {"count": 4, "excluded": 1, "precision": 0.625 / 1.5}, "groups": {}}


def test_metric_without_any_value_has_mean_none():
    rows = [{"category": 1, "recall@5": None}]
    assert summarize(rows)["groups"][1] == {"count": 1, "excluded": 1, "recall@5": None}


def test_summarizes_question_metrics_and_arc_rows():
    positions = {"a": 0, "b": 1, "c": 2}
    rows = [
        {"category": 3, **question_metrics(["a", "b"], ["a"], ["a", "c"], positions)},
        {"category": 3, **question_metrics(["b"], ["b"], [], positions)},
    ]
    summary = summarize(rows)
    assert summary["groups"][3]["recall@5"] == 0.5
    assert summary["groups"][3]["precision"] == 1.0
    assert summary["overall"]["excluded"] == 1
    arc_rows = [
        {"chat_file": "Chat_1", "global_recall": 0.5, "phase_coverage": 1.0, "phase_order": None},
        {"chat_file": "Chat_1", "global_recall": 1.0, "phase_coverage": 1.0, "phase_order": 0.5},
    ]
    assert summarize(arc_rows, by="chat_file")["groups"]["Chat_1"] == {
        "count": 2,
        "excluded": 0,
        "global_recall": 0.75,
        "phase_coverage": 1.0,
        "phase_order": 0.5,
    }


def test_bad_rows_name_the_row_and_field():
    with pytest.raises(ValueError, match="row 1 has no 'category' field"):
        summarize([{"category": 1, "recall@5": 1.0}, {"recall@5": 1.0}])
    with pytest.raises(ValueError, match="row 0 field 'recall@5' is '1.0', expected a number or None"):
        summarize([{"category": 1, "recall@5": "1.0"}])
    with pytest.raises(ValueError, match="row 1 has no 'precision' field"):
        summarize([{"category": 1, "precision": 1.0}, {"category": 1}], metrics=["precision"])
