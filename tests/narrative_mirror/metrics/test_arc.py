import pytest

from narrative_mirror.metrics import (
    ARC_METRIC_KEYS,
    arc_case_metrics,
    arc_global_recall,
    arc_phase_coverage,
    arc_phase_order,
)

GOLD = [["a1", "a2"], ["b1"], ["c1", "c2"]]


def test_case_metrics_with_a_partly_misordered_answer():
    predicted = [["a1", "x"], ["c1"], ["b1", "a2"]]
    # Comparable pairs (gold phase, predicted phase): a1 (0,0), a2 (0,2), b1 (1,2), c1 (2,1):
    # a1<b1 1, a1<c1 1, a2=b1 0.5, a2>c1 0, b1>c1 0 -> 2.5 / 5.
    assert arc_case_metrics(GOLD, predicted) == {"global_recall": 0.8, "phase_coverage": 1.0, "phase_order": 0.5}
    assert tuple(arc_case_metrics(GOLD, predicted)) == ARC_METRIC_KEYS


def test_recall_and_coverage_from_a_flat_found_set():
    assert arc_global_recall(GOLD, ["a2", "zz"]) == pytest.approx(1 / 5)
    assert arc_phase_coverage(GOLD, ["a2", "zz"]) == pytest.approx(1 / 3)
    assert arc_phase_coverage(GOLD, ["a1", "a2", "c2"]) == pytest.approx(2 / 3)
    assert arc_global_recall(GOLD, []) == 0.0


@pytest.mark.parametrize(
    ("predicted", "expected"),
    [
        ([["a1", "a2"], ["b1"], ["c1", "c2"]], 1.0),
        ([["c1", "c2"], ["b1"], ["a1", "a2"]], 0.0),
        ([["a1", "b1", "c1"]], 0.5),  # flat answer: every pair is a tie
        ([["a1"], ["b1"], ["a1"]], 1.0),  # a repeated id counts at its first phase
        ([["a2"], ["a1", "x"]], None),  # only phase 0 found: no pair to compare
        ([], None),
    ],
)
def test_phase_order(predicted, expected):
    assert arc_phase_order(GOLD, predicted) == expected


def test_phases_without_ids_are_not_counted():
    assert arc_phase_coverage([["a1"], [], ["c1"]], ["a1"]) == 0.5
    assert arc_case_metrics([[], []], [["a1"]]) == dict.fromkeys(ARC_METRIC_KEYS)


def test_bad_input_names_the_problem():
    with pytest.raises(ValueError, match="evidence id 'b1' is in phases 1 and 2"):
        arc_global_recall([["a1"], ["b1"], ["b1"]], ["a1"])
    with pytest.raises(TypeError, match=r"gold_phases\[0\] must be a collection of ids"):
        arc_global_recall(["a1", "b1"], ["a1"])
    with pytest.raises(TypeError, match=r"predicted_phases\[1\] must be a collection of ids"):
        arc_phase_order(GOLD, [["a1"], "b1"])
