import pytest
from llm_servers import fault_server

from narrative_mirror.agent.contract import Facets
from narrative_mirror.agent.planner import plan_llm, plan_offline, question_intent
from narrative_mirror.llm import LLMClient, LLMError


@pytest.mark.parametrize(
    "question, route, intent",
    [
        ("When did Kate visit Art Basel?", "direct", "when"),
        ("Which place did Elise visit in the first week of 2024?", "direct", "where"),
        ("Is Ben vegan?", "direct", "yes_no"),
        ("What exercises do Kate and Elise both do to reduce stress?", "multi_hop", "what"),
        ("Where are Kate and Elise planning to celebrate New Year 2025?", "multi_hop", "where"),
        ("How many loaves did Ana bake?", "multi_hop", "how_many"),
        ("Why did Ana quit her job?", "multi_hop", "why"),
        ("What are some tips that Kate gave Elise?", "multi_hop", "what"),
        ("How did Elise's flu develop from the first symptoms to recovery?", "global", "story"),
        ("What happened with Ana's tomato garden?", "global", "story"),
        ("How did Ben cope after the knee injury?", "global", "story"),
    ],
)
def test_offline_routes_follow_the_question_form(question, route, intent):
    got_route, facets, _ = plan_offline(question)
    assert (got_route, facets.intent) == (route, intent)


@pytest.mark.parametrize(
    "question, intent",
    [
        ("What helps Paola when she's tired?", "what"),  # "when" opens a clause, not the question
        ("Can Vanessa be considered a pacific person when she faces aggression?", "yes_no"),
        ("What do the locations where Kate spends her holidays have in common?", "what"),
        ("Since when has Moon been in different families?", "when"),
        ("In which country did Elise ski?", "where"),
    ],
)
def test_when_and_where_ask_only_when_they_open_the_question(question, intent):
    assert question_intent(question) == intent


def test_offline_facets_split_targets_artifact_and_time():
    _, facets, _ = plan_offline("Which place did Elise visit in the first week of 2024?")
    assert facets == Facets(
        intent="where", target=["Elise"], artifact=["place", "visit"], time="in the first week of 2024"
    )
    _, facets, _ = plan_offline("When did Kate visit Art Basel?")
    assert facets.target == ["Kate", "Art Basel"] and facets.artifact == ["visit"] and facets.time is None
    _, facets, _ = plan_offline("How did Elise's flu develop?")
    assert facets.target == ["Elise"] and facets.artifact == ["flu", "develop"]


def test_llm_planner_reads_route_and_facets_from_the_reply():
    reply = {"route": "multi_hop", "intent": "what", "target": ["Ana", " "], "artifact": ["Tomatoes"], "time": None}
    with fault_server("ok_json", content=reply) as server:
        route, facets, reason = plan_llm(LLMClient(server.settings()), "Which tomatoes did Ana grow?")
        request = server.chat_requests[0]
    assert (route, reason) == ("multi_hop", "llm")
    assert facets == Facets(intent="what", target=["Ana"], artifact=["tomatoes"], time=None)
    assert request["messages"][1]["content"] == "Question: Which tomatoes did Ana grow?"


def test_llm_planner_takes_missing_or_bad_facets_from_the_rules():
    with fault_server("ok_json", content={"route": "global", "target": [3], "artifact": []}) as server:
        route, facets, _ = plan_llm(LLMClient(server.settings()), "Which tomatoes did Ana grow?")
    assert route == "global" and facets == plan_offline("Which tomatoes did Ana grow?")[1]


@pytest.mark.parametrize("reply", [{"route": "call_tool_delete"}, {"route": 3}, {"intent": "what"}])
def test_llm_planner_rejects_a_reply_without_a_known_route(reply):
    with fault_server("ok_json", content=reply) as server, pytest.raises(LLMError) as caught:
        plan_llm(LLMClient(server.settings()), "Which tomatoes did Ana grow?")
    assert caught.value.kind == "malformed"
