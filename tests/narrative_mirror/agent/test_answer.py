from datetime import datetime

from narrative_mirror.agent.answer import Claim, EvidenceMessage, extractive_claims, support, verify
from narrative_mirror.agent.grading import FacetMatch


def message(local_id, position, text, terms=(), speaker="Ana"):
    return EvidenceMessage(
        local_id=local_id, position=position, speaker=speaker, text=text, timestamp=datetime(2024, 3, 1 + position),
        grade=0.9, match=FacetMatch(frozenset(terms), 1.0 if terms else 0.0, True),
    )


def test_support_is_the_share_of_claim_words_in_the_cited_messages():
    assert support(Claim("Ana bought cherry tomatoes [D1:3]"), ["Ana: Cherry tomatoes, the seller said."]) == 0.75
    assert support(Claim("Yes."), ["anything"]) == 1.0  # nothing checkable


def test_verify_keeps_supported_claims_and_explains_each_rejection():
    evidence = {"D1:3": "Ana: Cherry tomatoes, the seller said they grow fast.", "D8:1": "Ana: The seedlings sprouted."}
    claims = [
        Claim("Ana bought cherry tomatoes", ["D1:3"]),
        Claim("The seedlings sprouted", ["D8:1", "D9:9"]),
        Claim("Ana sold the tomatoes at the market for profit", ["D1:3"]),
        Claim("Ana grows tomatoes", []),
    ]
    verified, problems = verify(claims, evidence)
    assert [c.text for c in verified] == ["Ana bought cherry tomatoes"]
    assert problems == [
        "Unverified (cites ['D9:9'], not in the evidence): The seedlings sprouted",
        "Unverified (only 40% of its words are in ['D1:3']): Ana sold the tomatoes at the market for profit",
        "Unverified (cites no evidence): Ana grows tomatoes",
    ]


def test_extractive_claims_quote_new_facets_and_tell_stories_in_order():
    evidence = [
        message("D20:1", 12, "I harvested the tomatoes. So sweet!", {"harvest", "tomato"}),
        message("D20:3", 14, "I picked a bowl of tomatoes.", {"tomato"}),  # adds no new facet term
        message("D1:1", 0, "I bought tomato seeds for the balcony.", {"tomato", "seed"}),
    ]
    direct = extractive_claims(evidence, "direct")
    assert [c.ids for c in direct] == [["D20:1"], ["D1:1"]]
    assert direct[0].text == 'Ana on 13 Mar 2024: "I harvested the tomatoes." [D20:1]'
    story = extractive_claims(evidence, "global")
    assert [c.ids for c in story] == [["D1:1"], ["D20:1"], ["D20:3"]]  # time order


def test_statements_are_quoted_before_questions():
    evidence = [
        message("D1:2", 1, "Nice, which kind of tomatoes?", {"tomato", "kind"}, speaker="Ben"),
        message("D1:3", 2, "Cherry tomatoes, they grow fast.", {"tomato"}),
    ]
    assert [c.ids for c in extractive_claims(evidence, "direct")] == [["D1:3"], ["D1:2"]]
