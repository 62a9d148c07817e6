"""The agent graph offline, on the real retriever over a tiny hand-made chat (see conftest.py)."""

import pytest

from narrative_mirror.agent.answer import NO_ANSWER
from narrative_mirror.agent.contract import Facets
from narrative_mirror.agent.narrative import MAX_IDS, MIN_IDS
from narrative_mirror.agent.profiles import Profile, profiles
from narrative_mirror.agent.state import Run
from narrative_mirror.query import arc, ask

QUESTIONS = ["Where does Ben run?", "What are some things Ben did for his knee?"]
GARDEN_STORY = "How did Ana's tomato garden develop?"


def test_direct_question_is_answered_from_the_message_that_states_it(retriever, chat_file):
    answer = ask(retriever, chat_file, "What kind of tomatoes is Ana growing?")
    assert answer.route == "direct" and answer.profile == "balanced" and not answer.degraded
    assert "D1:3" in answer.selected_ids  # "Cherry tomatoes, the seller said ..."
    # The answer is the part of that message the question does not already say, verified offline.
    assert answer.answer.startswith("Cherry tomatoes") and not answer.abstained
    assert [(c.ids, c.supported) for c in answer.claims] == [(["D1:3"], True)]
    assert answer.verifier.startswith("offline") and not any(u.startswith("Unverified") for u in answer.unknowns)
    assert all(item.text.split(": ", 1)[0] in {"Ana", "Ben"} and item.point for item in answer.evidence)


def test_where_when_and_unanswerable_questions(retriever, chat_file):
    # "Wow, where do you run?" is found; the answer is its reply, which shares no word with the question
    where = ask(retriever, chat_file, "Where does Ben run?")
    # unsure (its message is a reply that names no run): the message itself, with author and time
    assert where.answer == 'Ben, 1 Mar 2024 09:10: "Along the river path near the old mill."' and not where.abstained
    assert [(c.ids, c.supported) for c in where.claims] == [(["D1:6"], True)] and "D1:6" in where.selected_ids
    # "I will see a physiotherapist about the knee tomorrow", said on 8 March 2024
    when = ask(retriever, chat_file, "When will Ben see a physiotherapist?")
    assert when.answer == "9 March 2024" and [c.ids for c in when.claims] == [["D8:6"]]
    # The chat has no dog: the best message found is about something else, the answer abstains
    dog = ask(retriever, chat_file, "What is the name of Ben's dog?")
    assert dog.abstained and dog.answer == NO_ANSWER and not any(c.supported for c in dog.claims)
    # a name is asked for and none is given in the evidence: no claim is drafted at all
    assert dog.claims == [] and "No selected evidence mentions: name, dog" in dog.unknowns
    assert "No message of this chat mentions: name, dog" in dog.unknowns  # the never-said check read the chat


def test_trace_has_three_ranked_checkpoints_that_agree_with_the_answer(retriever, chat_file):
    answer = ask(retriever, chat_file, "Did Ana harvest the tomatoes?")
    trace = answer.trace
    for checkpoint in (trace.candidates, trace.reranked, trace.final):
        scores = [r.score for r in checkpoint]
        assert scores == sorted(scores, reverse=True) and len(checkpoint) > 0
    # Final selection = the best-graded prefix of the reranked pool = the answer's evidence.
    assert [r.id for r in trace.final] == [r.id for r in trace.reranked[: len(trace.final)]]
    assert set(answer.selected_ids) == {r.id for r in trace.final}
    assert {r.id for r in trace.reranked} <= {r.id for r in trace.candidates}
    assert trace.queries[0] == "Did Ana harvest the tomatoes?"
    assert [s.split(":")[0] for s in trace.steps][:4] == ["planner", "retriever", "grader", "coverage"]


@pytest.mark.parametrize("profile", ["fast", "balanced", "deep"])
@pytest.mark.parametrize("question", QUESTIONS)
def test_every_run_stays_inside_its_profile_budgets(retriever, chat_file, profile, question):
    p = profiles()[profile]
    answer = ask(retriever, chat_file, question, profile=profile)
    assert 1 <= answer.rounds <= p.max_rounds
    assert answer.calls <= p.max_calls
    assert answer.fetches == len(answer.evidence) <= p.max_evidence_fetches
    # Offline, a call is a search, the evidence pull or the pull of replies to questions in the evidence.
    pulls = 1 + any(s.startswith("generator: replies") for s in answer.trace.steps)
    assert answer.calls == len(answer.trace.queries) + pulls and answer.llm_calls == 0
    assert len(answer.trace.queries) <= answer.rounds * (1 + p.rewrite_candidates)
    assert answer.stop_reason in ("coverage_met", "max_rounds", "no_new_evidence", "budget_calls")
    if profile == "fast":
        assert answer.rounds == 1


def custom(name, max_rounds=3, max_calls=60, rewrites=2, min_top5=1.0, min_must=99):
    return Profile(name, max_rounds, 8, 4, max_calls, rewrites, min_top5, min_must)


def test_first_search_size_rewrite_count_and_evidence_cap_bind(retriever, chat_file):
    narrow = Profile("narrow", 1, 3, 1, 20, 0, 0.0, 0)  # 3 hits, no variants, 1 evidence message
    answer = ask(retriever, chat_file, "Where does Ben run?", profile=narrow)
    assert len(answer.trace.reranked) == 3 and answer.trace.queries == ["Where does Ben run?"]
    assert len(answer.trace.final) == answer.fetches == 1  # (an abstention lists only evidence about the question)
    one_variant = Profile("one_variant", 1, 3, 2, 20, 1, 0.0, 0)
    answer = ask(retriever, chat_file, "Where does Ben run?", profile=one_variant)
    assert len(answer.trace.queries) == 2 and 3 <= len(answer.trace.reranked) <= 6
    assert len(answer.evidence) <= 2


def test_stop_when_coverage_is_met(retriever, chat_file):
    answer = ask(retriever, chat_file, "Where does Ben run?", profile=custom("easy", min_top5=0.0, min_must=0))
    assert (answer.stop_reason, answer.rounds) == ("coverage_met", 1)
    assert not any(u.startswith("Evidence may be incomplete") for u in answer.unknowns)


def test_stop_at_max_rounds(retriever, chat_file):
    answer = ask(retriever, chat_file, "Where does Ben run?", profile=custom("two_rounds", max_rounds=2))
    assert (answer.stop_reason, answer.rounds) == ("max_rounds", 2)
    assert any(u.startswith("Evidence may be incomplete (max_rounds)") for u in answer.unknowns)


def test_stop_after_two_rounds_without_new_evidence(retriever, chat_file):
    # No variants allowed: rounds 2 and 3 cannot add evidence, so the run stops before round 6.
    answer = ask(retriever, chat_file, "Where does Ben run?", profile=custom("patient", max_rounds=6, rewrites=0))
    assert (answer.stop_reason, answer.rounds) == ("no_new_evidence", 3)
    assert answer.trace.queries == ["Where does Ben run?"]


def test_stop_when_the_call_budget_is_spent(retriever, chat_file):
    # 3 calls: the question, one variant, and the evidence pull kept in reserve.
    answer = ask(retriever, chat_file, "Where does Ben run?", profile=custom("poor", max_calls=3, rewrites=7))
    assert (answer.stop_reason, answer.calls, answer.rounds) == ("budget_calls", 3, 1)
    assert len(answer.trace.queries) == 2
    assert any("budget: skipped search" in s for s in answer.trace.steps)


def test_a_chat_message_addressing_an_ai_is_flagged_and_never_steers_the_run(retriever, chat_file, injected_chat_file):
    runs = [
        ("Did Ana harvest the tomatoes?", "balanced"),
        ("Where does Ben run?", "balanced"),
        ("What happened to the tomatoes?", "fast"),
    ]
    for question, profile in runs:
        clean = ask(retriever, chat_file, question, profile=profile)
        injected = ask(retriever, injected_chat_file, question, profile=profile)
        # Flagged wherever it is found (the tomato questions find it; "Where does Ben run?" need not).
        assert injected.flagged_ids == (["X1"] if "X1" in {r.id for r in injected.trace.reranked} else [])
        assert clean.flagged_ids == [] and ("tomato" not in question or injected.flagged_ids == ["X1"])
        assert (injected.route, injected.rounds, injected.calls, injected.stop_reason) == (
            clean.route,
            clean.rounds,
            clean.calls,
            clean.stop_reason,
        )
        assert "X1" not in injected.selected_ids
        assert "died" not in injected.answer and "delete_all" not in injected.answer
    # Where the evidence lies away from the injected message, the answer is exactly the same.
    # (Next to it, its mere presence as a document can shift the retriever's ranks a little.)
    for question, profile in runs[:2]:
        assert (
            ask(retriever, injected_chat_file, question, profile=profile).answer
            == ask(retriever, chat_file, question, profile=profile).answer
        )
    # Found and graded (it is data), but never evidence.
    injected = ask(retriever, injected_chat_file, "What happened to the tomatoes?", profile="deep")
    assert "X1" in {r.id for r in injected.trace.reranked} and "X1" not in injected.selected_ids


@pytest.mark.parametrize("profile", ["fast", "balanced", "deep"])
def test_arc_phases_are_chronological_bounded_and_drawn_from_whole_blocks(retriever, chat_file, profile):
    result = arc(retriever, chat_file, GARDEN_STORY, profile=profile)
    p = profiles()[profile]
    assert result.route == "global" and result.phases
    assert all(MIN_IDS <= len(phase.evidence) <= MAX_IDS for phase in result.phases)
    position = {
        m.local_id: m.position for m in retriever.messages(chat_file, [i for ph in result.phases for i in ph.evidence])
    }
    firsts = [position[phase.evidence[0]] for phase in result.phases]
    assert firsts == sorted(firsts)
    ids = [i for phase in result.phases for i in phase.evidence]
    assert len(ids) == len(set(ids)) and result.selected_ids == ids
    assert sorted(r.id for r in result.trace.final) == sorted(ids)
    assert result.fetches <= p.arc_blocks and result.calls <= p.max_calls
    # The story's three garden sessions are all told.
    days = {i.split(":")[0] for i in ids}
    assert {"D1", "D8", "D20"} <= days


def test_arc_pulls_its_story_blocks_in_one_call_and_picks_from_their_full_id_sets(retriever, chat_file):
    # The story comes from the blocks the block search found, whole, in one call (no message
    # search); it pulls the profile's story blocks (3), not its evidence fetches (4).
    narrow = Profile("narrow", 1, 2, 4, 10, 0, 0.0, 0, story_blocks=3)
    result = arc(retriever, chat_file, GARDEN_STORY, profile=narrow)
    assert [s.kind for s in result.trace.searches] == ["blocks"]
    assert (result.calls, result.stop_reason) == (1, "story_found")
    blocks = result.trace.searches[0].found
    assert len(blocks) == 3 and blocks == [b.block_id for b in retriever.search_blocks(chat_file, GARDEN_STORY, k=3)]
    members = {i for b in blocks for i in retriever.block_ids(chat_file, b)}
    assert {r.id for r in result.trace.candidates} == members == {r.id for r in result.trace.reranked}
    assert set(result.selected_ids) <= members and result.fetches == len(blocks)
    assert all(MIN_IDS <= len(phase.evidence) <= MAX_IDS for phase in result.phases)


def test_a_story_block_that_addresses_an_ai_is_flagged_never_evidence(retriever, injected_chat_file):
    story = arc(retriever, injected_chat_file, GARDEN_STORY, profile="balanced")
    members = {i for b in story.trace.searches[0].found for i in retriever.block_ids(injected_chat_file, b)}
    assert "X1" in members  # X1 sits in the harvest block, which the story pulls whole
    assert story.flagged_ids == ["X1"] and "X1" not in story.selected_ids
    assert any(i.startswith("D20:") for i in story.selected_ids)


def test_arc_without_blocks_tells_the_story_from_message_searches(retriever, chat_file, monkeypatch):
    monkeypatch.setattr(retriever, "search_blocks", lambda *args, **kwargs: [])  # a chat with no block layer
    result = arc(retriever, chat_file, GARDEN_STORY, profile="balanced")
    kinds = [s.kind for s in result.trace.searches]
    assert kinds[:2] == ["blocks", "question"] and "variant" in kinds
    assert result.phases and result.stop_reason != "story_found"
    ids = result.selected_ids
    assert set(ids) <= {r.id for r in result.trace.reranked} and len(ids) <= profiles()["balanced"].arc_blocks


@pytest.mark.parametrize("profile", ["fast", "balanced"])
def test_global_route_searches_the_blocks_and_its_evidence_spans_the_story(retriever, chat_file, profile):
    answer = ask(retriever, chat_file, GARDEN_STORY, profile=profile)
    assert answer.route == "global"
    blocks = [s for s in answer.trace.searches if s.kind == "blocks"]
    assert len(blocks) == 1 and blocks[0].found == [
        b.block_id for b in retriever.search_blocks(chat_file, GARDEN_STORY, k=profiles()[profile].max_evidence_fetches)
    ]
    # The three garden blocks lead the block search; the best message of each is evidence, so
    # the answer spans the story (planted, sprouted, harvested), not only its best message.
    assert answer.selected_ids == ["D1:1", "D8:1", "D20:1"]
    assert answer.calls <= profiles()[profile].max_calls


def test_a_direct_question_asks_no_block_search(retriever, chat_file):
    answer = ask(retriever, chat_file, "Where does Ben run?")
    assert answer.route == "direct" and "blocks" not in {s.kind for s in answer.trace.searches}


def test_oneshot_is_deprecated_and_answers_with_bounded_phases(retriever, chat_file):
    with pytest.warns(DeprecationWarning, match="oneshot"):
        answer = ask(retriever, chat_file, GARDEN_STORY, mode="oneshot")
    assert (answer.mode, answer.route, answer.stop_reason, answer.rounds) == ("oneshot", "oneshot", "oneshot", 1)
    assert answer.phases and all(MIN_IDS <= len(p.evidence) <= MAX_IDS for p in answer.phases)
    assert answer.selected_ids == [i for p in answer.phases for i in p.evidence]
    assert [s.kind for s in answer.trace.searches] == ["question", "blocks"]
    assert answer.calls <= profiles()["balanced"].max_calls
    assert all(item.text.startswith(("Ana: ", "Ben: ")) for item in answer.evidence)


def _search(scored):
    from datetime import datetime

    from narrative_mirror.retrieval.records import Hit, RankTrace, SearchResult

    hits = [
        Hit(
            local_id=lid,
            message_id=f"c/{lid}",
            position=i,
            session=1,
            speaker="Ana",
            text="t",
            timestamp=datetime(2024, 1, 1),
            score=score,
        )
        for i, (lid, score) in enumerate(scored)
    ]
    return SearchResult(
        hits=hits, trace=RankTrace([(h.local_id, h.score) for h in hits], []), query_info={}, timings_ms={}
    )


@pytest.mark.parametrize("task, variant_weight", [("ask", 0.4), ("arc", 1.0)])
def test_variant_hits_count_less_than_the_questions_own_for_point_questions(task, variant_weight):
    run = Run(
        retriever=None,
        chat_file="c",
        question="q",
        profile=profiles()["balanced"],
        llm=None,
        task=task,
        facets=Facets(intent="what"),
    )
    run.add_result(_search([("A", 0.5), ("B", 0.25)]))  # the question's own search
    run.add_result(_search([("C", 0.5), ("B", 0.5)]))  # a variant's
    relative = {lid: item.relative for lid, item in run.pool.items()}
    assert relative["A"] == 1.0
    assert relative["C"] == pytest.approx(variant_weight)
    assert relative["B"] == pytest.approx(max(0.5, variant_weight))  # the better of its two scores


def test_multi_hop_searches_each_side_and_the_trace_shows_what_each_found(retriever, chat_file):
    answer = ask(retriever, chat_file, "Did Ana harvest tomatoes and did Ben see a physiotherapist?")
    assert answer.route == "multi_hop"
    searches = answer.trace.searches
    assert [(s.kind, s.query) for s in searches[:5]] == [
        ("question", "Did Ana harvest tomatoes and did Ben see a physiotherapist?"),
        ("sub_query", "Ana harvest tomatoes physiotherapist"),
        ("sub_query", "Ben harvest tomatoes physiotherapist"),
        ("sub_query", "Ana Ben harvest tomatoes"),
        ("sub_query", "Ana Ben did see a physiotherapist"),
    ]
    assert all(s.kind == "corrective" for s in searches[5:])  # the second round's re-searches
    assert [s.query for s in searches] == answer.trace.queries
    # Each side of the question finds its own message first.
    assert searches[3].found[0] == "D20:1"  # "I harvested the first cherry tomatoes ..."
    assert searches[4].found[0] == "D8:6"  # "I will see a physiotherapist about the knee tomorrow."
    # The ranking is the question's own search; the sub-questions' hits come after its hits.
    assert [r.id for r in answer.trace.reranked[: len(searches[0].found)]] == searches[0].found
    assert set(answer.selected_ids) == {i for s in searches for i in s.selected}


def test_a_question_that_does_not_split_searches_facet_variants(retriever, chat_file):
    answer = ask(retriever, chat_file, "Where does Ben run?")
    assert answer.route == "direct"
    kinds = [s.kind for s in answer.trace.searches]
    assert kinds[:2] == ["question", "variant"] and set(kinds[1:]) <= {"variant", "corrective"}
    assert answer.trace.searches[0].found[:2] == ["D1:4", "D1:6"]  # "I started running again", "Along the river path"


def test_the_graph_state_is_the_working_memory_checkpointed_step_by_step(retriever, chat_file):
    from langgraph.checkpoint.memory import InMemorySaver

    from narrative_mirror.agent.graph import build_graph

    question = "Did Ana harvest the tomatoes?"
    graph = build_graph(checkpointer=InMemorySaver())
    config = {
        "configurable": {"retriever": retriever, "profile": profiles()["balanced"], "llm": None, "thread_id": "t1"},
        "recursion_limit": 30,
    }
    final = graph.invoke({"chat_file": chat_file, "question": question, "task": "ask"}, config)
    plain = ask(retriever, chat_file, question)
    assert final["result"].selected_ids == plain.selected_ids and final["result"].answer == plain.answer
    assert final["steps"] == plain.trace.steps and final["calls"] == plain.calls
    assert [s.query for s in final["searches"]] == plain.trace.queries
    # Every node's state is kept: after the first retriever step the pool is there, the answer not yet.
    history = list(graph.get_state_history(config))[::-1]  # oldest first
    after_retriever = next(h for h in history if h.next == ("grader",))
    assert after_retriever.values["pool"] and after_retriever.values.get("result") is None
    assert [s.query for s in after_retriever.values["searches"]][0] == question
    assert graph.get_state(config).values["result"].answer == plain.answer


def test_run_agent_reports_each_node_as_it_finishes(retriever, chat_file):
    seen: list[tuple[str, list[str]]] = []
    answer = ask(retriever, chat_file, "Where does Ben run?", on_step=lambda node, lines: seen.append((node, lines)))
    nodes = [node for node, _ in seen]
    assert nodes[:4] == ["planner", "retriever", "grader", "coverage"] and nodes[-2:] == ["generator", "verification"]
    assert [line for _, lines in seen for line in lines] == answer.trace.steps
