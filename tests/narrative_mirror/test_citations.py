from __future__ import annotations

import pytest

from narrative_mirror.citations import detect_citations

JOB = ("D1:1", "I start my new job at the Elm Street bakery tomorrow.")
RYE_QUESTION = ("D1:2", "Good luck! Do they bake rye bread there?")
MARATHON = ("D1:4", "My marathon training starts next week.")
LOAVES = ("D11:1", "First week at the bakery went great, I baked forty loaves of rye.")
SAVE_LOAF = ("D11:2", "Save me a loaf of that rye bread!")


def test_agent_evidence_ids_are_taken_as_given():
    cited, confidence = detect_citations(
        "Ana works at a bakery.", [JOB, MARATHON], evidence_ids=["D1:1", "D9:9", "D1:1"]
    )
    # The agent's ids are taken as given (deduplicated), even one retrieval did not return.
    assert cited == ["D1:1", "D9:9"]
    assert confidence == 1.0  # no claims given: nothing to read a confidence from


def test_seed_001_confidence_is_read_from_the_claims_never_a_constant():
    # A claim quoted from its message: every word ("elm", "street", "bakery") is in it.
    quoted = detect_citations("the Elm Street bakery", [JOB], ["D1:1"], claims=[("the Elm Street bakery", ["D1:1"])])
    assert quoted == (["D1:1"], 1.0)
    # Half borne out: "forty" and "loaves" are in D11:1, "croissants" and "Tuesday" are not.
    half = detect_citations("x", [LOAVES], ["D11:1"], claims=[("forty croissants loaves on Tuesday", ["D11:1"])])
    assert half[1] == pytest.approx(2 / 4)
    # The mean over claims; a claim's best cited message counts; a message outside ``returned``
    # is read from ``texts``; a claim citing nothing readable scores 0.
    _, mean = detect_citations(
        "x",
        [JOB],
        ["D1:1", "D11:1", "D7:7"],
        claims=[("rye loaves", ["D1:1", "D11:1"]), ("Elm Street", ["D1:1"]), ("marathon", ["D7:7"])],
        texts={"D11:1": LOAVES[1]},
    )
    assert mean == pytest.approx((1.0 + 1.0 + 0.0) / 3)


def test_empty_agent_evidence_means_nothing_cited():
    assert detect_citations("I found nothing about that.", [JOB], evidence_ids=[]) == ([], 1.0)


def test_substring_of_a_sentence_chunk_cites_despite_case_and_spacing():
    answer = "Ana said:  i start my new  job at the ELM street bakery tomorrow, so she works there."
    cited, confidence = detect_citations(answer, [JOB, RYE_QUESTION, MARATHON])
    assert cited == ["D1:1"]
    # JOB: clear substring (1); the other two share no content word with the answer (1 each).
    assert confidence == pytest.approx(1.0)


def test_curly_apostrophes_match_straight_ones():
    message = ("D2:1", "We’re moving to Lisbon at the end of the summer.")
    cited, _ = detect_citations("They said we're moving to Lisbon at the end of the summer.", [message])
    assert cited == ["D2:1"]


def test_token_overlap_fallback_and_its_clarity():
    answer = "Ana baked forty loaves of rye at the bakery."
    cited, confidence = detect_citations(answer, [LOAVES, SAVE_LOAF, MARATHON])
    # LOAVES: no 50-char prefix in the answer, but 5 of its 7 content words
    # {first, week, bakery, baked, forty, loaves, rye} are -> cited, clarity (5/7 - .6) / .4.
    # SAVE_LOAF: 1 of {save, loaf, rye, bread} -> not cited, clarity (.6 - .25) / .6.
    # MARATHON: no shared word -> not cited, clarity 1.
    assert cited == ["D11:1"]
    assert confidence == pytest.approx(((5 / 7 - 0.6) / 0.4 + (0.6 - 0.25) / 0.6 + 1.0) / 3)


def test_overlap_just_below_the_threshold_is_not_cited():
    cited, confidence = detect_citations("Ana baked forty loaves of rye.", [LOAVES])
    assert cited == []  # 4 of 7 content words: 0.571 < 0.6
    assert confidence == pytest.approx((0.6 - 4 / 7) / 0.6)


def test_short_messages_need_three_shared_words():
    # No chunk longer than 20 characters, and only one content word ("save"): ambiguous, not cited.
    cited, confidence = detect_citations("Save me one, he said.", [("D3:1", "Save me one")])
    assert cited == []
    assert confidence == 0.0


def test_nothing_returned_is_a_clear_signal():
    assert detect_citations("Anything.", []) == ([], 1.0)


def test_answer_must_be_text():
    with pytest.raises(TypeError, match="answer_text"):
        detect_citations(None, [JOB])  # type: ignore[arg-type]
