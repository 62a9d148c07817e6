from narrative_mirror.metrics import OUTCOMES, attribute_losses


def test_each_gold_id_is_attributed_to_the_stage_that_lost_it():
    outcome = attribute_losses(
        gold=["a", "b", "c", "d", "e", "c"],
        candidates=["x", "b", "c", "d"],
        reranked_top=["c", "d"],
        selected=["d", "e"],
    )
    assert outcome == {
        "a": "never_candidate",
        "b": "ranked_too_low",
        "c": "dropped_at_selection",
        "d": "found",
        "e": "found",  # selected without being a candidate (e.g. added as a neighbour)
    }
    assert list(outcome) == ["a", "b", "c", "d", "e"]
    assert set(outcome.values()) == set(OUTCOMES)


def test_id_in_the_reranked_top_but_not_among_candidates_reached_selection():
    assert attribute_losses(["a"], [], ["a"], []) == {"a": "dropped_at_selection"}


def test_empty_gold_gives_no_attribution():
    assert attribute_losses([], ["a"], ["a"], ["a"]) == {}
