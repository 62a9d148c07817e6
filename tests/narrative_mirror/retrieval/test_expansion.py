import pytest

from narrative_mirror.retrieval.expansion import block_range, expand, neighbours


def test_neighbours_nearest_first_later_first_and_clipped():
    assert neighbours(5, 2, 1, 10) == [(6, 1), (4, 1), (3, 2)]
    assert neighbours(0, 2, 2, 3) == [(1, 1), (2, 2)]
    assert neighbours(2, 1, 1, 3) == [(1, 1)]
    with pytest.raises(ValueError, match="row 3 outside a chat of 3 messages"):
        neighbours(3, 1, 1, 3)


def test_block_range_returns_all_ids():
    ids = [f"D1:{i}" for i in range(1, 40)]
    assert block_range(ids) == ids


def test_expand_neighbours_with_decay_keeps_the_best_offer():
    ranked = [(10, 1.0), (3, 0.8), (11, 0.1)]
    out, source = expand(ranked, 20, seeds=2, before=1, after=2, decay=0.5)
    # seed 10 offers 11: .5, 9: .5, 12: .25 ; seed 3 offers 4: .4, 2: .4, 5: .2
    assert out == [(10, 1.0), (3, 0.8), (11, 0.5), (9, 0.5), (4, 0.4), (2, 0.4), (12, 0.25), (5, 0.2)]
    assert source == {11: "neighbour", 9: "neighbour", 12: "neighbour", 4: "neighbour", 2: "neighbour", 5: "neighbour"}


def test_expand_only_seeds_spread_and_own_score_wins():
    ranked = [(1, 1.0), (2, 0.9), (7, 0.3)]
    out, source = expand(ranked, 10, seeds=1, before=1, after=1, decay=0.5)
    # row 2 keeps its own 0.9 (> 0.5 offered); row 7 is no seed
    assert out == [(1, 1.0), (2, 0.9), (0, 0.5), (7, 0.3)]
    assert source == {0: "neighbour"}


def test_expand_block_mates():
    block_of = [0, 0, 0, 1, 1, -1]
    block_rows = {0: [0, 1, 2], 1: [3, 4]}
    out, source = expand(
        [(1, 1.0), (5, 0.5)],
        6,
        seeds=2,
        before=0,
        after=0,
        decay=0.5,
        block_of=block_of,
        block_rows=block_rows,
        block_decay=0.3,
    )
    assert out == [(1, 1.0), (5, 0.5), (0, 0.3), (2, 0.3)]
    assert source == {0: "block", 2: "block"}
