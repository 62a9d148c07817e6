from dataclasses import replace
from datetime import datetime

from narrative_mirror.agent.answer import (
    NO_ANSWER,
    RELEVANCE_MIN,
    Claim,
    EvidenceMessage,
    offline_answer,
    states_what_is_asked,
    support,
    verify,
)
from narrative_mirror.agent.grading import FacetMatch
from narrative_mirror.retrieval.records import ChatMessage


def message(local_id, position, text, terms=(), speaker="Ana", day=None):
    return EvidenceMessage(
        ChatMessage(
            local_id=local_id,
            message_id=f"c/{local_id}",
            position=position,
            session=1,
            speaker=speaker,
            text=text,
            timestamp=day or datetime(2024, 3, 1 + position),
        ),
        grade=0.9,
        match=FacetMatch(frozenset(terms), 1.0 if terms else 0.0, True),
    )


def test_support_is_the_share_of_claim_words_in_the_cited_messages():
    assert support(Claim("Ana bought cherry tomatoes [D1:3]"), ["Ana: Cherry tomatoes, the seller said."]) == 0.75
    assert support(Claim("Yes."), ["anything"]) == 1.0  # nothing checkable


def test_verify_keeps_supported_claims_and_explains_each_rejection():
    evidence = {
        "D1:3": message("D1:3", 2, "Cherry tomatoes, the seller said they grow fast."),
        "D8:1": message("D8:1", 7, "The seedlings sprouted."),
    }
    relevant = {"D1:3": 0.6, "D8:1": 0.5}
    claims = [
        Claim("Ana bought cherry tomatoes", ["D1:3"]),
        Claim("The seedlings sprouted", ["D8:1", "D9:9"]),
        Claim("Ana sold the tomatoes at the market for profit", ["D1:3"]),
        Claim("Ana grows tomatoes", []),
        Claim("Cherry tomatoes", ["D1:3"], kind="phrase", sentence="Cherry tomatoes, the seller said they grow fast."),
        Claim("Roma tomatoes", ["D1:3"], kind="phrase", sentence="Cherry tomatoes, the seller said they grow fast."),
    ]
    verified, problems = verify(claims, evidence, "what", relevant)
    assert [c.text for c in verified] == ["Ana bought cherry tomatoes", "Cherry tomatoes"]
    assert problems == [
        "Unverified (cites ['D9:9'], not in the evidence): The seedlings sprouted",
        "Unverified (not what ['D1:3'] says): Ana sold the tomatoes at the market for profit",
        "Unverified (cites no evidence): Ana grows tomatoes",
        "Unverified (not what ['D1:3'] says): Roma tomatoes",
    ]


def test_verify_needs_the_slot_the_question_asks_for_and_a_message_about_the_question():
    day = datetime(2024, 6, 7, 18, 0)  # a Friday
    evidence = {"D4:2": message("D4:2", 3, "The operation is next Tuesday at the city hospital.", day=day)}
    when = Claim("11 June 2024", ["D4:2"], kind="date", sentence="The operation is next Tuesday at the city hospital.")
    assert verify([when], evidence, "when", {"D4:2": 0.5}) == ([when], [])
    wrong_slot = Claim("the city hospital", ["D4:2"], kind="phrase")
    assert verify([wrong_slot], evidence, "when", {"D4:2": 0.5})[1] == [
        "Unverified (does not give what a 'when' question asks for): the city hospital"
    ]
    off_topic = verify([when], evidence, "when", {"D4:2": RELEVANCE_MIN - 0.01})[1]
    assert off_topic == [
        f"Unverified (['D4:2'] not about the question: similarity {RELEVANCE_MIN - 0.01:.2f}): 11 June 2024"
    ]


def test_verify_needs_evidence_about_what_the_question_asks():
    """When no evidence message mentions any of the question's topic terms, the search found
    something else: "What is the name of Ben's dog?" in a chat without one abstains."""

    def evidence(question_terms_found):  # the matches of D1:5 depend on the question asked
        return {
            "D1:5": message("D1:5", 4, "Wow, where do you run?", terms=question_terms_found),
            "D1:6": message("D1:6", 5, "Along the river path.", speaker="Ben"),
        }

    river = Claim("Along the river path", ["D1:6"], kind="place")
    # the cited reply does not say "run", the question it answers does
    assert verify([river], evidence({"run"}), "where", {"D1:6": 0.4}, topic=["run"]) == ([river], [])
    assert verify([river], evidence(set()), "what", {"D1:6": 0.4}, topic=["name", "dog"])[1] == [
        "Unverified (no evidence message mentions name, dog): Along the river path"
    ]


def test_offline_answer_is_the_slot_span_and_abstains_when_nothing_fills_it():
    day = datetime(2024, 6, 7, 18, 0)
    evidence = [message("D4:2", 3, "Dad is fine. The operation is next Tuesday in Trondheim.", day=day)]
    assert offline_answer("When is the operation?", "when", evidence)[0] == "11 June 2024"
    assert offline_answer("Where is the operation?", "where", evidence)[0] == "Trondheim"
    text, claims, unknowns = offline_answer("How many dogs does Ana have?", "how_many", evidence)
    assert (text, claims) == (NO_ANSWER, []) and unknowns


def test_a_list_of_names_is_verified_name_by_name_and_the_topic_by_the_question_subjects():
    evidence = {"D1:1": message("D1:1", 0, "We flew from Miami to Los Angeles and then drove to San Diego.")}
    names = [Claim("Miami, Los Angeles", ["D1:1"], kind="names"), Claim("Miami, Boston", ["D1:1"], kind="names")]
    verified, problems = verify(names, evidence, "what", {"D1:1": 0.5})
    assert [c.text for c in verified] == ["Miami, Los Angeles"]
    assert problems == ["Unverified (not what ['D1:1'] says): Miami, Boston"]
    # "How long has Kevin been interning at Microsoft?": no message has "interning" (nor "long", a
    # word of the question's form), one names Microsoft: about the question.
    microsoft = {"D7:4": message("D7:4", 0, "I have been at Microsoft for three months now")}
    claim = [Claim("for three months", ["D7:4"], kind="quantity")]
    assert verify(claim, microsoft, "how_many", {"D7:4": 0.5}, topic=["long", "interning"])[0] == []
    assert (
        verify(claim, microsoft, "how_many", {"D7:4": 0.5}, topic=["long", "interning"], subjects=["Microsoft"])[0]
        == claim
    )


def test_a_claim_is_verified_only_when_its_own_messages_state_what_is_asked():
    """ "Where do we meet?" is answered by its reply (verified, through the question it answers); a
    place taken from a message about lunch passes the checks of the answer (another evidence
    message is about meeting) but its message does not state where they meet: no badge."""
    asked = message("D1:1", 0, "Where do we meet on Friday?", terms={"meet"})
    reply = message("D1:2", 1, "At the Crown, by the back door", speaker="Ben")
    reply.reply_to = "D1:1"
    lunch = message("D1:4", 3, "Lunch at Nando's was great")
    evidence = {"D1:1": asked, "D1:2": reply, "D1:4": lunch}
    crown = Claim("the Crown", ["D1:2"], kind="place")
    nandos = Claim("Nando's", ["D1:4"], kind="place")
    relevant = {"D1:2": 0.4, "D1:4": 0.3}
    assert verify([crown, nandos], evidence, "where", relevant, topic=["meet"])[0] == [crown, nandos]
    assert states_what_is_asked(crown, evidence, ["meet"])
    assert not states_what_is_asked(nandos, evidence, ["meet"])
    assert states_what_is_asked(nandos, evidence, [], ["Nando's"])  # the place the question names
    assert not states_what_is_asked(Claim("the Crown", ["D9:9"]), evidence, ["meet"])  # cites nothing shown


def test_a_message_about_the_subject_but_not_what_is_asked_of_it_is_not_verified():
    """ "What is right in front of the house in Lagos?": the booking names the house and Lagos, not
    what is in front of it; João's "That's the beach right in front of it", two messages later,
    states it, read with the booking it reacts to (another person's message just before)."""
    booking = message("L:1", 0, "I booked the house in Lagos for 14-21 July", terms={"hous"}, speaker="Maria")
    photo = message("L:2", 1, "<attached: photo.jpg>", speaker="João")
    beach = message("L:3", 2, "That's the beach right in front of it", terms={"front"}, speaker="João")
    evidence = {m.message.local_id: m for m in (booking, photo, beach)}
    asked = ["front", "house"]
    assert not states_what_is_asked(Claim("14-21 July", ["L:1"], kind="phrase"), evidence, asked, ["Lagos"])
    assert states_what_is_asked(Claim("the beach", ["L:3"], kind="phrase"), evidence, asked, ["Lagos"])
    beach.message = replace(beach.message, speaker="Maria")
    assert not states_what_is_asked(Claim("the beach", ["L:3"], kind="phrase"), evidence, asked)  # her own next words
