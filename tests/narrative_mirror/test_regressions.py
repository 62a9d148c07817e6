"""Standing regressions (narrative_mirror/regressions.py): an evaluation's failed checks stand
until its next evaluation passes or its baseline is pinned."""

import pytest

from narrative_mirror import regressions

FAILED = [{"check": "qa_recall_regression", "severity": "ERROR", "description": "recall@10 0.700 -> 0.500"}]


def test_failed_checks_stand_until_a_passing_evaluation_or_a_pin(tmp_path):
    assert regressions.read(tmp_path) == {}
    regressions.record(tmp_path, "qa_eval", "chat_a", "run1abcdef", FAILED)
    regressions.record(
        tmp_path,
        "arc_eval",
        "chat_a",
        "run2abcdef",
        [{"check": "arc_recall_regression", "severity": "WARN", "description": "drop 0.03"}],
    )
    standing = regressions.read(tmp_path)
    assert set(standing) == {"qa_eval/chat_a", "arc_eval/chat_a"}
    assert regressions.is_error(standing["qa_eval/chat_a"]) and not regressions.is_error(standing["arc_eval/chat_a"])
    line = regressions.describe(standing["qa_eval/chat_a"])
    assert line.startswith("standing regression of qa_eval on chat_a since run run1abcd: qa_recall_regression ERROR")
    assert "baseline pin --chat chat_a --asset qa_eval" in line

    regressions.record(tmp_path, "arc_eval", "chat_a", "run3abcdef", [])  # recovered
    assert set(regressions.read(tmp_path)) == {"qa_eval/chat_a"}
    assert regressions.accept(tmp_path, "qa_eval", "chat_a") is True  # the baseline moved on purpose
    assert regressions.read(tmp_path) == {} and regressions.accept(tmp_path, "qa_eval", "chat_a") is False


def test_a_damaged_file_is_named(tmp_path):
    regressions.standing_path(tmp_path).parent.mkdir(parents=True)
    regressions.standing_path(tmp_path).write_text("{not json")
    with pytest.raises(ValueError, match="standing_regressions.json: not a JSON object"):
        regressions.read(tmp_path)
