"""Seed 002's remaining KPIs, computed by ``evaluate_qa`` / ``qa_summary`` from the answers:
top-5 / top-10 gold share, the agent's graded top-5 relevance, ambiguity-resolution rate and
average tool calls (exact values over three hand-made answers)."""

from types import SimpleNamespace

import polars as pl
import pytest

from narrative_mirror import evaluation as ev


def _answer(ranked, calls, rounds, must_have_hits, top5_relevance):
    return SimpleNamespace(
        answer="x",
        ranked_ids=ranked,
        selected_ids=ranked[:2],
        claims=[],
        abstained=False,
        rounds=rounds,
        llm_calls=0,
        calls=calls,
        verifier="offline",
        route="direct",
        degraded=False,
        profile="balanced",
        coverage={"top5_relevance": top5_relevance, "must_have_hits": must_have_hits},
        trace=SimpleNamespace(candidates=[SimpleNamespace(id=i) for i in ranked]),
    )


def test_seed_002_kpis_top5_top10_gold_share_ambiguity_resolution_and_tool_calls():
    ids = [f"D1:{i}" for i in range(1, 13)]
    gold_qa = pl.DataFrame(
        {
            "question_id": ["q1", "q2", "q3"],
            "chat_file": ["c"] * 3,
            "category": [1, 1, 5],
            "question": ["a?", "b?", "c?"],
            "gold_ids": [["D1:1", "D1:7"], ["D1:12"], []],
            "answer": ["x", "y", "z"],
        }
    )
    messages = pl.DataFrame({"local_id": ids, "position": list(range(12))})
    answers = {
        # balanced asks for 2 must-have hits
        "a?": _answer(ids, calls=3, rounds=1, must_have_hits=2, top5_relevance=0.8),  # no corrective round
        "b?": _answer(ids, calls=7, rounds=2, must_have_hits=2, top5_relevance=0.5),  # corrective, then met
        "c?": _answer(ids, calls=8, rounds=3, must_have_hits=1, top5_relevance=0.2),  # corrective, not met
    }
    rows = ev.evaluate_qa(lambda q: answers[q], gold_qa, messages, "fp")
    kpis = ev.qa_summary(rows)["overall"]
    # q1: D1:1 in the top 5 (1/5), D1:1 and D1:7 in the top 10 (2/10); q2: D1:12 ranks 12th (0, 0);
    # q3 has no gold evidence (unanswerable): left out of the gold shares.
    assert kpis["top5_gold_share"] == pytest.approx((0.2 + 0.0) / 2)
    assert kpis["top10_gold_share"] == pytest.approx((0.2 + 0.0) / 2)
    assert kpis["top5_graded_relevance"] == pytest.approx(0.5)
    assert kpis["ambiguity_resolution_rate"] == pytest.approx(1 / 2)  # of the two corrective questions
    assert kpis["mean_tool_calls"] == pytest.approx(6.0)
    assert set(ev.KPI_KEYS) >= {
        "top5_gold_share",
        "top10_gold_share",
        "ambiguity_resolution_rate",
        "mean_tool_calls",
        "claim_gold_citation_precision",
    }


def test_seed_002_independent_claim_check_and_unknowns_when_needed():
    from narrative_mirror.agent.contract import ClaimCheck, EvidenceItem

    ids = [f"D1:{i}" for i in range(1, 13)]
    evidence = [
        EvidenceItem(id="D1:1", text="Ana: I baked forty loaves of rye today", point="", speaker="Ana"),
        EvidenceItem(id="D1:2", text="Ben: save me some rye bread", point="", speaker="Ben"),
    ]
    claims = [
        ClaimCheck(text="Ana baked forty loaves", ids=["D1:1"], supported=True),
        ClaimCheck(text="Ben flew to Paris in June", ids=["D1:2"], supported=True),
    ]  # its verifier erred
    gold_qa = pl.DataFrame(
        {
            "question_id": ["q1", "q2", "q3", "q4"],
            "chat_file": ["c"] * 4,
            "category": [1, 1, 5, 1],
            "question": ["a?", "b?", "c?", "d?"],
            "gold_ids": [["D1:1"], ["D1:12"], [], ["D1:3"]],
            "answer": ["x"] * 4,
        }
    )
    messages = pl.DataFrame({"local_id": ids, "position": list(range(12))})

    def answer(ranked, abstained, with_claims=False):
        out = _answer(ranked, calls=1, rounds=1, must_have_hits=2, top5_relevance=0.8)
        out.abstained, out.question, out.evidence = abstained, "?", evidence
        out.claims = claims if with_claims else []
        return out

    answers = {
        "a?": answer(ids[:5], False, with_claims=True),  # gold retrieved, answered
        "b?": answer(ids[:5], True),  # gold D1:12 not retrieved: abstaining was needed
        "c?": answer(ids[:5], False),  # no gold (unanswerable) and answered: wrong
        "d?": answer(ids[:5], True),
    }  # gold D1:3 retrieved, yet abstained: a missed answer
    kpis = ev.qa_summary(ev.evaluate_qa(lambda q: answers[q], gold_qa, messages, "fp"))["overall"]
    assert kpis["supported_claim_rate"] == pytest.approx(1.0)  # the answerer's own verdict
    assert kpis["supported_claim_rate_lexical_check"] == pytest.approx(0.5)  # Paris/June are not in D1:2
    assert kpis["unknown_rate"] == pytest.approx(0.5)  # the plain share of abstentions
    assert kpis["unknowns_when_needed"] == pytest.approx(1 / 2)  # b (right) and c (answered) needed one
    assert kpis["unknowns_when_not_needed"] == pytest.approx(1 / 2)  # a answered, d abstained
    assert kpis["abstention_decision_accuracy"] == pytest.approx(2 / 4)
