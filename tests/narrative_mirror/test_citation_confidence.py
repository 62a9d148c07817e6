"""Seed 001: a graded confidence per cited message, read from how the claim is supported."""

from __future__ import annotations

from datetime import datetime

import pytest

from narrative_mirror.citation_confidence import CitedMessage, cited_confidences, claim_confidence, mean_confidence

SAID = datetime(2023, 5, 8, 10, 0)
YESTERDAY = CitedMessage("I finally went to the pottery class yesterday!", SAID)
LOAVES = CitedMessage("First week at the bakery went great, I baked forty loaves of rye.", SAID)
MARATHON = CitedMessage("My marathon training starts next week.", SAID)


def test_a_date_resolved_from_yesterday_is_supported_by_its_message():
    # The claim's date is what "yesterday" said on 8 May means: the typed value and the "when" slot hold.
    assert claim_confidence("7 May 2023", YESTERDAY, "when") == pytest.approx(1.0)
    # Another day: the slot is still stated, the value is not.
    assert claim_confidence("3 June 2023", YESTERDAY, "when") == pytest.approx(0.5)
    assert claim_confidence("7 May 2023", MARATHON, "when") < claim_confidence("7 May 2023", YESTERDAY, "when")


def test_numbers_names_and_words_grade_partial_support():
    full = claim_confidence("Ana baked forty loaves of rye at the bakery", LOAVES, "how_many")
    half = claim_confidence("Ana baked twelve croissants", LOAVES, "how_many")
    none = claim_confidence("Ana baked twelve croissants", MARATHON, "how_many")
    assert 1.0 >= full > half > none >= 0.0
    assert 0.0 < half < 1.0  # graded, not 0/1


def test_yes_is_read_with_its_question_and_scores_between_the_extremes(embedder):
    rye = CitedMessage("Yes, rye and sourdough, every morning at five.", SAID)
    per_id = cited_confidences(
        [("Yes", ["D1:3"])], {"D1:3": rye}, question="Do they bake rye bread there?", intent="yes_no", embedder=embedder
    )
    off_topic = cited_confidences(
        [("Yes", ["D1:4"])],
        {"D1:4": MARATHON},
        question="Do they bake rye bread there?",
        intent="yes_no",
        embedder=embedder,
    )
    assert 0.0 < off_topic["D1:4"] < per_id["D1:3"] < 1.0


def test_each_cited_id_takes_its_best_claim_and_unreadable_ids_score_zero():
    per_id = cited_confidences(
        [("forty loaves", ["D11:1"]), ("Ana baked twelve croissants", ["D11:1", "D9:9"])], {"D11:1": LOAVES}
    )
    assert list(per_id) == ["D11:1", "D9:9"]
    assert per_id["D11:1"] == pytest.approx(1.0)
    assert per_id["D9:9"] == 0.0
    assert mean_confidence(list(per_id.values())) == pytest.approx(0.5)


def test_citing_nothing_has_no_confidence():
    assert mean_confidence([]) is None
    assert cited_confidences([], {}) == {}
