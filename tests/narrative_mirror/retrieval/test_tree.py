import pytest

from narrative_mirror.retrieval.fusion import rrf
from narrative_mirror.retrieval.tree import dual_path

# 12 messages in 4 blocks of 3: block b holds rows 3b..3b+2; thread 0 = blocks 2 and 3.
BLOCK_OF = [r // 3 for r in range(12)]
THREADS = {0: [2, 3]}


def ranking(rows):
    return [(r, 1.0 / (i + 1)) for i, r in enumerate(rows)]


def test_dense_anchors_exploit_the_local_branch():
    leaves = ranking([0, 1, 6, 2, 9, 3, 4, 5, 7, 8, 10, 11])
    result = dual_path(
        leaves, [], [], block_of=BLOCK_OF, thread_blocks=THREADS, anchors=3, k_global=2, density_threshold=0.5, rrf_k=0
    )
    # leaf anchors 0, 1, 6: block 0 holds 2/3 of them -> exploit
    assert result.mode == "exploit"
    assert result.density == {0: pytest.approx(2 / 3), 2: pytest.approx(1 / 3)}
    assert result.active_blocks == [0, 2]
    local = [0, 1, 6, 2, 7, 8]  # leaf order restricted to blocks 0 and 2
    expected = rrf([local, [0, 1]], weights=[1.5, 1.0], k=0)
    assert result.ranked[: len(expected)] == expected
    assert [r for r, _ in result.ranked] == [0, 1, 6, 2, 7, 8, 9, 3, 4, 5, 10, 11]
    assert result.ranked[6:] == [(9, 0.0), (3, 0.0), (4, 0.0), (5, 0.0), (10, 0.0), (11, 0.0)]
    assert result.path[0] == ["local", "global"] and result.path[7] == ["local"]


def test_branch_hits_activate_blocks():
    leaves = ranking([0, 3, 6, 9, 1, 2, 4, 5, 7, 8, 10, 11])
    result = dual_path(
        leaves,
        ranking([1]),
        ranking([0]),
        block_of=BLOCK_OF,
        thread_blocks=THREADS,
        anchors=4,
        k_global=3,
        density_threshold=0.6,
        rrf_k=0,
    )
    # flat anchors (RRF, k=0): m0, b1, t0 score 1 (ties: leaves' list first), then m3 (1/2)
    # L_init = [0, 3] -> blocks 0, 1 at density 1/2 < 0.6 -> explore; B_hit = {1} + thread 0's {2, 3}
    assert result.mode == "explore"
    assert result.density == {0: 0.5, 1: 0.5}
    assert result.active_blocks == [0, 1, 2, 3]
    expected = rrf([[r for r, _ in leaves], [0, 3, 6]], weights=[1.0, 1.5], k=0)
    assert result.ranked == expected


def test_explore_when_density_below_threshold():
    leaves = ranking([0, 3, 6, 9, 1, 2, 4, 5, 7, 8, 10, 11])
    result = dual_path(
        leaves,
        [],
        [],
        block_of=BLOCK_OF,
        thread_blocks=THREADS,
        anchors=4,
        k_global=2,
        density_threshold=0.3,
        rrf_k=0,
        explore_weights=(1.0, 2.0),
    )
    # four leaf anchors in four blocks: density 1/4 each < 0.3 -> explore
    assert result.mode == "explore"
    assert result.active_blocks == [0, 1, 2, 3]
    expected = rrf([[r for r, _ in leaves], [0, 3]], weights=[1.0, 2.0], k=0)
    assert result.ranked == expected


def test_threads_stand_for_their_blocks():
    leaves = ranking([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])
    result = dual_path(
        leaves,
        [],
        ranking([0]),
        block_of=BLOCK_OF,
        thread_blocks=THREADS,
        anchors=2,
        k_global=1,
        density_threshold=0.9,
        rrf_k=0,
    )
    # anchors: m0 and t0 -> active = block 0 (leaf) + blocks 2, 3 (thread 0)
    assert result.active_blocks == [0, 2, 3]
    assert result.mode == "exploit"  # the single leaf anchor: density 1.0
    local_rows = [r for r, _ in result.ranked if "local" in result.path.get(r, [])]
    assert sorted(local_rows) == [0, 1, 2, 6, 7, 8, 9, 10, 11]
