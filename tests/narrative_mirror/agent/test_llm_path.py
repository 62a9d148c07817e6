"""The agent with an LLM: every node's LLM step, fault fallbacks, and chat text kept as data."""

import dataclasses
import json
import time

import pytest
from llm_servers import fault_server, llama_server

from narrative_mirror.agent.narrative import MAX_IDS, MIN_IDS
from narrative_mirror.agent.profiles import profiles
from narrative_mirror.llm import DATA_BEGIN, DATA_BLOCK_NOTICE, DATA_END, CircuitBreaker, LLMClient
from narrative_mirror.query import arc, ask

QUESTION = "What kind of tomatoes did Ana buy?"
# One reply that satisfies every node's contract (the fault server answers every call alike).
REPLY = {
    "route": "direct",
    "intent": "what",
    "target": ["Ana"],
    "artifact": ["tomatoes", "buy"],
    "time": None,
    "queries": ["cherry tomatoes seller"],
    "grades": [{"id": "D1:3", "grade": 0.95}, {"id": "D1:1", "grade": 0.9}, {"id": "X1", "grade": 1.0}],
    "answer": "Ana bought cherry tomato seeds.",
    "claims": [{"text": "Ana bought cherry tomatoes", "ids": ["D1:3"]}],
    "unknowns": [],
    "phases": [
        {"name": "seeds", "summary": "Ana buys seeds", "evidence": ["D1:1", "D1:3"]},
        {"name": "harvest", "summary": "Ana harvests", "evidence": ["D20:1", "D20:3"]},
    ],
    "checks": [{"claim": 1, "question": "Which tomatoes?", "answer": "cherry tomatoes", "verdict": "supported"}],
}


def chat_texts(retriever, chat_file):
    chat = retriever.chat(chat_file)
    return list(chat.raw_texts)


def assert_chat_text_only_inside_data_blocks(requests, texts):
    """Every chat message that reaches the LLM sits inside the data block, under a system
    prompt that says the block is data."""
    for body in requests:
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        outside = user
        while DATA_BEGIN in outside:
            start = outside.index(DATA_BEGIN)
            outside = outside[:start] + outside[outside.index(DATA_END, start) + len(DATA_END) :]
        for text in texts:
            assert json.dumps(text)[1:-1] not in outside and text not in outside
        if outside != user:
            assert DATA_BLOCK_NOTICE in system


def test_every_node_uses_the_llm_within_budget(retriever, chat_file):
    with fault_server("ok_json", content=REPLY) as server:
        answer = ask(retriever, chat_file, QUESTION, profile="fast", llm=LLMClient(server.settings()))
        requests = server.chat_requests
    assert not answer.degraded and answer.degraded_reason is None
    # planner, rewrite (grounded on the first search's messages), grader, generator, verifier.
    assert answer.llm_calls == len(requests) == 5
    assert answer.trace.queries == [QUESTION, "cherry tomatoes seller"]
    assert answer.calls == 5 + 2 + 1 <= profiles()["fast"].max_calls
    assert answer.verifier.startswith("LLM chain-of-verification") and answer.claims[0].supported
    assert answer.answer == "Ana bought cherry tomato seeds."
    # The LLM's grades decide the selection; the ranking stays the retriever's.
    first = retriever.search(chat_file, QUESTION, k=1).hits[0].local_id
    assert answer.trace.reranked[0].id == first and answer.trace.reranked[0].score == 1.0
    assert {e.id: e.point.split("grade ")[-1] for e in answer.evidence}["D1:3"] == "0.95"
    rewrite_prompt = requests[1]["messages"][1]["content"]
    assert '"id": "D1:3"' in rewrite_prompt and "/S1/B0" not in rewrite_prompt  # leaf messages, no blocks
    assert_chat_text_only_inside_data_blocks(requests, chat_texts(retriever, chat_file))


def test_unverified_llm_claims_become_unknowns(retriever, chat_file):
    reply = REPLY | {
        "answer": "Ana bought roses in Paris.",
        "claims": [
            {"text": "Ana bought roses in Paris", "ids": ["D1:3"]},
            {"text": "Ana bought cherry tomatoes", "ids": ["D1:3"]},
        ],
    }
    with fault_server("ok_json", content=reply) as server:
        answer = ask(retriever, chat_file, QUESTION, profile="fast", llm=LLMClient(server.settings()))
    assert answer.answer == "Ana bought cherry tomatoes"
    assert "Unverified (not what ['D1:3'] says): Ana bought roses in Paris" in answer.unknowns


@pytest.mark.parametrize(
    "mode, kind, settings",
    [
        ("slow", "timeout", {"timeout_s": 0.3, "max_retries": 0}),
        ("http_500", "http", {"max_retries": 1}),
        ("malformed", "malformed", {}),
    ],
)
def test_llm_failure_falls_back_to_the_offline_path_and_says_so(retriever, chat_file, mode, kind, settings):
    offline = ask(retriever, chat_file, QUESTION, profile="balanced")
    with fault_server(mode, delay_s=2.0) as server:
        answer = ask(retriever, chat_file, QUESTION, profile="balanced", llm=LLMClient(server.settings(**settings)))
        n_requests = len(server.chat_requests)
    assert answer.degraded and answer.degraded_reason.startswith(f"planner: LLM {kind} error")
    # The first failure switches the run offline: one LLM call, then exactly the offline run.
    assert answer.llm_calls == 1 and answer.calls == offline.calls + 1
    assert n_requests == 1 + settings.get("max_retries", 2) * (mode == "http_500")
    assert (answer.answer, answer.selected_ids, answer.route) == (offline.answer, offline.selected_ids, offline.route)


def test_a_hung_llm_costs_an_ask_its_deadline_and_no_more(retriever, chat_file):
    began = time.monotonic()
    offline = ask(retriever, chat_file, QUESTION, profile="balanced")
    offline_s = time.monotonic() - began
    quick = dataclasses.replace(profiles()["balanced"], deadline_s=1.0)
    with fault_server("hang") as server:
        started = time.monotonic()
        answer = ask(retriever, chat_file, QUESTION, profile=quick, llm=LLMClient(server.settings(timeout_s=30)))
        elapsed = time.monotonic() - started
    # the deadline, then the offline path (timed above, with a margin for a busy machine); the
    # client's own timeout (30 s) never decides
    assert elapsed < 1.0 + max(1.0, 3 * offline_s), (elapsed, offline_s)
    assert answer.degraded and "planner: LLM deadline error" in answer.degraded_reason
    assert (answer.answer, answer.selected_ids) == (offline.answer, offline.selected_ids)


@pytest.mark.parametrize("mode", ["garbage_bytes", "bad_body"])
def test_a_reply_that_is_not_a_completion_falls_back(retriever, chat_file, mode):
    with fault_server(mode) as server:
        answer = ask(retriever, chat_file, QUESTION, profile="fast", llm=LLMClient(server.settings()))
    assert answer.degraded and "LLM malformed error" in answer.degraded_reason and answer.answer


def test_after_repeated_failures_asks_go_straight_to_the_offline_path(retriever, chat_file):
    with fault_server("http_500") as server:
        llm = LLMClient(server.settings(max_retries=0), breaker=CircuitBreaker(failures_to_open=2, cooldown_s=60))
        for _ in range(2):
            assert "LLM http error" in ask(retriever, chat_file, QUESTION, profile="fast", llm=llm).degraded_reason
        sent = len(server.chat_requests)
        answer = ask(retriever, chat_file, QUESTION, profile="fast", llm=llm)
        assert len(server.chat_requests) == sent  # nothing sent while the circuit is open
    assert answer.degraded and "LLM circuit_open error" in answer.degraded_reason


def test_flaky_server_succeeds_after_a_retry(retriever, chat_file):
    with fault_server("flaky", content=REPLY) as server:
        answer = ask(retriever, chat_file, QUESTION, profile="fast", llm=LLMClient(server.settings(max_retries=1)))
        n_requests = len(server.chat_requests)
    assert not answer.degraded and answer.llm_calls == 5 and n_requests == 6


def test_injection_reaches_the_llm_only_as_data_and_changes_nothing(retriever, chat_file, injected_chat_file):
    runs = {}
    for name in (chat_file, injected_chat_file):
        with fault_server("ok_json", content=REPLY) as server:
            runs[name] = ask(
                retriever, name, "Did Ana harvest the tomatoes?", profile="balanced", llm=LLMClient(server.settings())
            )
            requests = server.chat_requests
        assert_chat_text_only_inside_data_blocks(requests, chat_texts(retriever, name))
    clean, injected = runs[chat_file], runs[injected_chat_file]
    assert (injected.route, injected.rounds, injected.calls, injected.llm_calls, injected.answer) == (
        clean.route,
        clean.rounds,
        clean.calls,
        clean.llm_calls,
        clean.answer,
    )
    # The LLM graded X1 1.0; a flagged message keeps at most its offline grade and is never evidence.
    grades = {r.id: r.score for r in injected.trace.reranked}
    assert grades["X1"] < 1.0 and "X1" not in injected.selected_ids and injected.flagged_ids == ["X1"]


def test_arc_with_the_llm_segmenter_holds_the_bounds(retriever, chat_file):
    with fault_server("ok_json", content=REPLY) as server:
        result = arc(
            retriever,
            chat_file,
            "How did Ana's tomato garden develop?",
            profile="balanced",
            llm=LLMClient(server.settings()),
        )
        segment_prompt = server.chat_requests[-1]["messages"][1]["content"]
    assert not result.degraded and [p.name for p in result.phases] == ["seeds", "harvest"]
    assert all(MIN_IDS <= len(p.evidence) <= MAX_IDS for p in result.phases)
    assert result.phases[0].evidence[:2] == ["D1:1", "D1:2"] and "D20:1" in result.phases[1].evidence
    assert "all_message_ids: ['D1:1', 'D1:2', 'D1:3']" in segment_prompt
    assert result.calls <= profiles()["balanced"].max_calls


@pytest.mark.llm_server
def test_real_llama_server_path_answers_within_budget(retriever, chat_file):
    with llama_server(timeout_s=60) as settings:
        llm = LLMClient(settings)
        answer = ask(retriever, chat_file, QUESTION, profile="fast", llm=llm)
        story = arc(retriever, chat_file, "How did Ana's tomato garden develop?", profile="fast", llm=llm)
    for result in (answer, story):
        assert result.calls <= profiles()["fast"].max_calls and result.llm_calls >= 1
        # SmolLM2 is weak: whatever it answers, the run either used it or said why not.
        assert result.degraded == bool(result.degraded_reason)
    assert answer.answer and answer.evidence
    assert story.phases and all(MIN_IDS <= len(p.evidence) <= MAX_IDS for p in story.phases)


@pytest.mark.llm_server
def test_an_injected_order_moves_neither_route_nor_evidence_with_a_real_llm(retriever, chat_file, injected_chat_file):
    """SmolLM2 on llama.cpp reads the chat with a message ordering it around: the planner never
    sees chat text (same route), and the flagged message is never evidence or cited."""
    question = "Did Ana harvest the tomatoes?"
    with llama_server(timeout_s=60) as settings:
        llm = LLMClient(settings)
        clean = ask(retriever, chat_file, question, profile="fast", llm=llm)
        injected = ask(retriever, injected_chat_file, question, profile="fast", llm=llm)
    assert injected.route == clean.route
    assert "X1" not in injected.selected_ids and "X1" not in [e.id for e in injected.evidence]
    assert injected.flagged_ids == ["X1"]
    assert "delete_all" not in injected.answer and "tomatoes died" not in injected.answer.lower()


def test_a_claim_the_llm_check_contradicts_moves_to_unknowns(retriever, chat_file):
    reply = REPLY | {
        "checks": [{"claim": 1, "question": "Which tomatoes did Ana buy?", "answer": "roma", "verdict": "contradicted"}]
    }
    with fault_server("ok_json", content=reply) as server:
        answer = ask(retriever, chat_file, QUESTION, profile="fast", llm=LLMClient(server.settings()))
    assert answer.abstained and answer.answer == "Not found in this chat."
    assert answer.claims[0].note == (
        "Unverified (LLM check: contradicted: Which tomatoes did Ana buy? -> roma): Ana bought cherry tomatoes"
    )
    assert answer.claims[0].note in answer.unknowns and answer.verifier.startswith("LLM chain-of-verification")


@pytest.mark.llm_server
def test_real_llm_verification_leaves_a_contradicted_claim_out(retriever, chat_file):
    """The verification step with SmolLM2 as the verifier: the offline checks stop a claim its
    message contradicts whatever the small model says, and the LLM check runs on the rest."""
    from narrative_mirror.agent.answer import (
        LLM_VERIFIER,
        OFFLINE_VERIFIER,
        Claim,
        EvidenceMessage,
        check_claims,
        llm_verify,
    )
    from narrative_mirror.agent.grading import FacetMatch
    from narrative_mirror.llm import LLMError

    def checked_by(llm, kept):  # what the graph's verification node does with the LLM's reply
        try:
            return llm_verify(llm, "What did Ana buy and harvest?", kept, evidence)
        except LLMError:
            return None

    hits = {h.local_id: h for h in retriever.messages(chat_file, ["D1:3", "D20:1"])}
    evidence = {i: EvidenceMessage(h, 0.9, FacetMatch(frozenset(), 0.0, True)) for i, h in hits.items()}
    claims = [
        Claim("Ana bought roses in Paris", ["D1:3"]),
        Claim("Ana harvested the first cherry tomatoes from the balcony", ["D20:1"]),
    ]
    with llama_server(timeout_s=60) as settings:
        llm = LLMClient(settings)
        verified, notes, verifier = check_claims(
            claims, evidence, "what", {"D1:3": 0.5, "D20:1": 0.5}, llm_check=lambda kept: checked_by(llm, kept)
        )
    assert notes[0] == "Unverified (not what ['D1:3'] says): Ana bought roses in Paris"
    assert claims[0] not in verified
    assert llm.calls == 1  # one verification call, for the claim that passed the offline checks
    # SmolLM2-135M may not keep the reply's shape: then the offline checks stand, and say so.
    assert verifier == (OFFLINE_VERIFIER if llm.failures else LLM_VERIFIER)
