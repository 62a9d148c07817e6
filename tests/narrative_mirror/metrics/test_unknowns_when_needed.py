"""Oracle test of "unknowns when needed" on cases small enough to count by hand."""

from __future__ import annotations

import pytest

from narrative_mirror.metrics.unknowns_when_needed import abstention_needed, unknowns_when_needed


def test_an_abstention_is_needed_without_gold_or_when_no_gold_was_retrieved():
    assert abstention_needed([], ["a", "b"])  # the chat does not answer it
    assert abstention_needed(["g"], ["a", "b"])  # its evidence was not found
    assert not abstention_needed(["g", "h"], ["a", "h"])  # one gold message found: it could be answered
    with pytest.raises(TypeError):
        abstention_needed("g", ["g"])


def test_the_three_rates_by_hand():
    cases = [
        (True, [], ["a"]),  # needed (no gold), abstained: right
        (False, ["g"], ["a"]),  # needed (gold not found), answered: wrong
        (True, ["g"], ["x"]),  # needed, abstained: right
        (False, ["g"], ["g", "a"]),  # not needed, answered: right
        (True, ["g", "h"], ["h"]),  # not needed, abstained: a missed answer
    ]
    rates = unknowns_when_needed(cases)
    assert rates["unknowns_when_needed"] == pytest.approx(2 / 3)
    assert rates["unknowns_when_not_needed"] == pytest.approx(1 / 2)
    assert rates["abstention_decision_accuracy"] == pytest.approx(3 / 5)
    # The plain abstention share (3/5 here) is not what this measures.
    assert unknowns_when_needed([(True, ["g"], ["g"])]) == {
        "unknowns_when_needed": None,
        "unknowns_when_not_needed": 1.0,
        "abstention_decision_accuracy": 0.0,
    }
    assert unknowns_when_needed([]) == dict.fromkeys(rates)
