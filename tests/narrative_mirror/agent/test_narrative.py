"""segment_narrative on hand-made blocks: grouping, coverage-oriented selection, bounds."""

from datetime import datetime, timedelta

import pytest
from llm_servers import fault_server

from narrative_mirror.agent import narrative
from narrative_mirror.agent.narrative import MAX_IDS, MIN_IDS, Block
from narrative_mirror.llm import DATA_BEGIN, DATA_END, LLMClient, LLMError
from narrative_mirror.retrieval.records import ChatMessage

T0 = datetime(2024, 3, 1, 9, 0)


def block(name: str, day: int, n: int, first_position: int, hour: int = 9) -> Block:
    start = T0 + timedelta(days=day - 1, hours=hour - 9)
    return Block(
        name,
        [
            ChatMessage(
                local_id=f"{name}:{i}",
                message_id=f"c/{name}:{i}",
                position=first_position + i,
                session=1,
                speaker="Ana" if i % 2 == 0 else "Ben",
                text=f"{name} message {i}",
                timestamp=start + timedelta(minutes=i),
            )
            for i in range(n)
        ],
    )


def ids(group):
    return [b.block_id for b in group]


def test_blocks_group_by_time_and_small_clusters_join_their_nearest_neighbour():
    a, b = block("A", 1, 3, 0), block("B", 1, 2, 3, hour=11)  # same morning: one phase
    c = block("C", 8, 4, 5)
    d = block("D", 20, 1, 9)  # alone it cannot give MIN_IDS ids: joins C, its only neighbour
    groups = narrative.group_blocks([d, c, b, a])
    assert [ids(g) for g in groups] == [["A", "B"], ["C", "D"]]


def test_more_clusters_than_max_phases_merge_the_closest_in_time():
    days = [1, 2, 10, 11, 20, 30, 40, 50]  # 8 clusters; closest pairs: (1,2) and (10,11)
    blocks = [block(f"B{d}", d, 3, 3 * i) for i, d in enumerate(days)]
    groups = narrative.group_blocks(blocks)
    assert [ids(g) for g in groups] == [["B1", "B2"], ["B10", "B11"], ["B20"], ["B30"], ["B40"], ["B50"]]


def test_the_story_keeps_its_best_scored_ids_ties_in_file_order():
    a, b = block("A", 1, 5, 0), block("B", 1, 4, 5)
    scores = {"A:1": 0.9, "B:2": 0.9, "A:3": 0.6, "B:0": 0.1}
    assert narrative.story_ids([b, a], scores, 3) == ["A:1", "B:2", "A:3"]
    assert narrative.story_ids([a, b], scores, 6) == ["A:1", "B:2", "A:3", "B:0", "A:0", "A:2"]


def test_selection_takes_the_chosen_ids_one_per_block_and_pads_to_the_minimum():
    a, b = block("A", 1, 5, 0), block("B", 1, 4, 5)
    scores = {"A:1": 0.9, "A:3": 0.6, "A:4": 0.2, "B:2": 0.3, "B:0": 0.1}
    # A:1, A:3 chosen; B is covered by its best id B:2; already 3 ids.
    assert narrative.select_phase_ids([a, b], scores, ["A:1", "A:3", "C:9"]) == ["A:1", "A:3", "B:2"]
    # Nothing chosen in a block: its best id, padded with the next best ids to MIN_IDS.
    assert narrative.select_phase_ids([a], {"A:4": 0.3, "A:0": 0.2}, []) == ["A:0", "A:1", "A:4"]
    # Ids of an earlier phase are never picked again.
    assert narrative.select_phase_ids([a], scores, ["A:1"], exclude={"A:1", "A:3"}) == ["A:0", "A:2", "A:4"]


def test_selection_is_cut_to_the_maximum_keeping_every_block():
    big, small = block("A", 1, 30, 0), block("B", 1, 3, 30)
    scores = {f"A:{i}": 0.99 - i / 100 for i in range(30)} | {"B:0": 0.2}
    picked = narrative.select_phase_ids([big, small], scores, [f"A:{i}" for i in range(30)])
    assert len(picked) == MAX_IDS
    assert "B:0" in picked and picked[: MAX_IDS - 1] == [f"A:{i}" for i in range(MAX_IDS - 1)]


def test_offline_segmentation_orders_phases_in_time_and_holds_the_bounds():
    blocks = [block("C", 8, 6, 10), block("A", 1, 4, 0), block("B", 3, 20, 4 + 6 + 10 + 6)]
    scores = {m.local_id: 0.8 for m in blocks[2].members}  # B's messages are the story's best
    phases = narrative.segment_offline(blocks, scores, ["story"], story_size=16)
    assert [p.evidence[0] for p in phases] == ["A:0", "C:0", "B:0"]  # by position, not input order
    assert all(MIN_IDS <= len(p.evidence) <= MAX_IDS for p in phases)
    # B's 16 best (all 0.8: the first 16 in file order) cut to MAX_IDS; A and C padded to MIN_IDS.
    assert phases[2].evidence == [f"B:{i}" for i in range(MAX_IDS)]
    assert len(phases[0].evidence) == len(phases[1].evidence) == MIN_IDS
    assert phases[0].name.startswith("1 Mar 2024")


def test_an_offline_phase_is_titled_with_its_date_and_a_sentence_of_its_own_messages():
    said = [
        "Morning!",
        "I went over on my ankle at football. Dr. Brandt thinks the ankle is sprained",
        "Is the ankle sprained?",
        "Yes, the ankle is the size of a grapefruit",
    ]
    members = [
        ChatMessage(
            local_id=f"D2:{i}",
            message_id=f"c/D2:{i}",
            position=i,
            session=2,
            speaker="Theo",
            text=text,
            timestamp=T0 + timedelta(days=3, minutes=i),
        )
        for i, text in enumerate(said)
    ]
    name, summary = narrative.describe(members, {"D2:3": 0.9}, ["Theo"])
    # The sentence whose words recur most in the phase ("ankle", "sprained"; ties: the earlier one),
    # whole: "Dr." ends no sentence. Not a keyword list.
    assert name == "4 Mar 2024: Dr. Brandt thinks the ankle is sprained"
    assert summary == "Theo: Yes, the ankle is the size of a grapefruit"  # its best message


def test_llm_segmentation_is_held_to_the_blocks_and_the_bounds():
    a, b, c = block("A", 1, 6, 0), block("B", 5, 20, 6), block("C", 9, 5, 26)
    reply = {
        "phases": [
            {"name": "late", "summary": "C part", "evidence": ["C:0", "C:1", "C:2", "C:3"]},
            {"name": "middle", "summary": "all of B", "evidence": [f"B:{i}" for i in range(20)]},
            {"name": "early", "summary": "A part", "evidence": ["A:2", "Z:9", "C:1"]},  # Z:9 unknown, C:1 taken
            {"name": "empty", "summary": "nothing known", "evidence": ["nope"]},
        ]
    }
    scores = {f"B:{i}": 1 - i / 40 for i in range(20)}
    with fault_server("ok_json", content=reply) as server:
        phases = narrative.segment_llm(LLMClient(server.settings()), "How did it go?", [c, a, b], scores)
        request = server.chat_requests[0]
    assert [p.name for p in phases] == ["early", "middle", "late"]
    assert phases[2].evidence == ["C:0", "C:1", "C:2", "C:3"]
    # Seed 000's soft cap: all 20 ids the LLM tied to block B stay (over 15, under the soft bound
    # of 25), and the phase says why; phases within the cap state no reason.
    assert phases[1].evidence == [f"B:{i}" for i in range(20)]
    assert phases[1].over_cap_reason.startswith(f"20 ids, over the soft cap of {MAX_IDS}: the segmenter tied them all")
    assert phases[0].over_cap_reason is None and phases[2].over_cap_reason is None
    # A:2 padded to MIN_IDS from its own block (no scores there: earliest first).
    assert phases[0].evidence == ["A:0", "A:1", "A:2"]
    # The LLM saw every id of every block, and message text only inside the data block.
    user = request["messages"][1]["content"]
    assert all(f"'{m.local_id}'" in user for blk in (a, b, c) for m in blk.members)
    data = user[user.index(DATA_BEGIN) : user.index(DATA_END)]
    assert "B message 0" in data and "B message 0" not in user.replace(data, "")


def test_llm_segmentation_without_any_known_id_is_malformed():
    with fault_server("ok_json", content={"phases": [{"name": "x", "evidence": ["Q:1"]}]}) as server:
        with pytest.raises(LLMError) as caught:
            narrative.segment_llm(LLMClient(server.settings()), "How?", [block("A", 1, 3, 0)], {})
    assert caught.value.kind == "malformed"


def test_seed_000_soft_cap_keeps_coverage_first_up_to_the_soft_bound():
    a, b = block("A", 1, 4, 0), block("B", 5, 40, 4)
    picks = ["A:3", *[f"B:{i}" for i in range(35)]]  # 36 ids tied to the two covered blocks
    reply = {"phases": [{"name": "all", "summary": "everything", "evidence": picks}]}
    scores = {f"B:{i}": 1 - i / 80 for i in range(40)}
    with fault_server("ok_json", content=reply) as server:
        (phase,) = narrative.segment_llm(LLMClient(server.settings()), "How did it go?", [a, b], scores)
    assert len(phase.evidence) == narrative.SOFT_MAX_IDS == 25
    # Coverage first: block A's only pick stays although it scores lowest; then B's best 24.
    assert phase.evidence == ["A:3", *[f"B:{i}" for i in range(24)]]
    assert "25 ids, over the soft cap of 15" in phase.over_cap_reason and "2 block(s)" in phase.over_cap_reason
