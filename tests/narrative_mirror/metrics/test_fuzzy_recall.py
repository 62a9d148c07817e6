import pytest

from narrative_mirror.metrics import fuzzy_recall

# Two days of five messages; file positions run on across the day boundary.
IDS = ["D1:1", "D1:2", "D1:3", "D1:4", "D1:5", "D3:1", "D3:2", "D3:3", "D3:4", "D3:5"]
POSITIONS = {local_id: position for position, local_id in enumerate(IDS)}


@pytest.mark.parametrize(
    ("returned", "expected"),
    [
        (["D1:3"], 1.0),  # position 2, 3 before D3:1 (position 5), across the day boundary
        (["D1:2"], 0.0),  # 4 before
        (["D3:4"], 1.0),  # 3 after
        (["D3:5"], 0.0),  # 4 after
        (["D3:1"], 1.0),  # exact
        ([], 0.0),
    ],
)
def test_window_edges_on_both_sides(returned, expected):
    assert fuzzy_recall(returned, ["D3:1"], POSITIONS) == expected


def test_gold_at_the_file_edges():
    assert fuzzy_recall(["D1:4"], ["D1:1"], POSITIONS) == 1.0  # window runs below position 0
    assert fuzzy_recall(["D3:2"], ["D1:1", "D3:5"], POSITIONS) == 0.5
    assert fuzzy_recall(["D3:2", "D3:2"], ["D1:1", "D3:5"], POSITIONS) == 0.5


def test_window_parameter():
    assert fuzzy_recall(["D1:3"], ["D1:5"], POSITIONS, window=2) == 1.0
    assert fuzzy_recall(["D1:3"], ["D1:5"], POSITIONS, window=1) == 0.0
    assert fuzzy_recall(["D1:3", "D1:5"], ["D1:5", "D1:4"], POSITIONS, window=0) == 0.5
    with pytest.raises(ValueError, match="window must be a non-negative integer"):
        fuzzy_recall(["D1:3"], ["D1:5"], POSITIONS, window=-1)


def test_empty_gold_is_not_scored():
    assert fuzzy_recall(["D1:1"], [], POSITIONS) is None


def test_unknown_ids_are_errors_naming_the_id():
    with pytest.raises(ValueError, match="gold id 'D9:9' is not in positions"):
        fuzzy_recall(["D1:1"], ["D9:9"], POSITIONS)
    with pytest.raises(ValueError, match="returned id 'D9:9' is not in positions"):
        fuzzy_recall(["D9:9"], ["D1:1"], POSITIONS)
