import pytest

from narrative_mirror.metrics.answer_contains import answer_contains
from narrative_mirror.metrics.answer_f1 import answer_f1, answer_tokens


def test_normalization_drops_case_punctuation_and_articles():
    assert answer_tokens("The 30 December, 2023!") == ["30", "december", "2023"]
    assert answer_tokens("Kate’s “best” friend, an artist") == ["kate", "s", "best", "friend", "artist"]


@pytest.mark.parametrize(
    "prediction, gold, f1",
    [
        ("30 December 2023", "30 December, 2023", 1.0),
        ("ham and peas", "ham and peas", 1.0),
        ("ham peas", "ham and peas", 0.8),  # P 2/2, R 2/3
        ("Kate made pasta with ham and peas", "ham and peas", 2 * (3 / 7) * 1 / (3 / 7 + 1)),
        ("Miami", "New York", 0.0),
        ("", "Miami", 0.0),
        ("two two", "two", 2 * 0.5 * 1 / 1.5),  # repeated tokens count once each
    ],
)
def test_answer_f1_exact_values(prediction, gold, f1):
    assert answer_f1(prediction, gold) == pytest.approx(f1)


def test_empty_gold_is_not_scorable():
    assert answer_f1("anything", "") is None and answer_contains("anything", " . ") is None


@pytest.mark.parametrize(
    "prediction, gold, contained",
    [
        ("She flew to Miami, Florida", "Miami", 1.0),
        ("on 30 December 2023 at noon", "30 December, 2023", 1.0),
        ("December 30 2023", "30 December 2023", 0.0),  # a different order is no containment
        ("Miami", "Miami Beach", 0.0),
    ],
)
def test_answer_contains(prediction, gold, contained):
    assert answer_contains(prediction, gold) == contained
