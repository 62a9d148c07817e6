"""Asking and searching several chats at once (issue 26 item 7), on a real home built by the
command line from three small chats: globs, comma lists and --all on the CLI, ``chats`` on the
API, every hit and evidence item naming its chat, and a token scoped to two of the three chats
that never learns the third exists (search, ask, errors)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from chat_factory import realtalk_chat, write_chat
from starlette.testclient import TestClient

from api.access import add_token, load_tokens
from api.app import create_app
from cli.main import main
from narrative_mirror.across_chats import NoChatMatches, searched_label, select_chats

BAKERY, GARDEN, FAMILY = "team_bakery_Ana_Ben", "team_garden_Cy_Dee", "family_trip_Eve_Fay"
LOCAL = "http://localhost"
CHATS = {
    BAKERY: realtalk_chat(
        [
            [
                ("Ana", "I start my new job at the bakery tomorrow"),
                ("Ben", "Good luck! Which bakery?"),
                ("Ana", "The one on Elm Street"),
                ("Ben", "Nice, I love their rye bread"),
            ],
            [
                ("Ana", "First day at the bakery went great"),
                ("Ben", "Told you!"),
                ("Ana", "I baked forty loaves of rye"),
                ("Ben", "Save me one"),
            ],
        ],
        speakers=("Ana", "Ben"),
    ),
    GARDEN: realtalk_chat(
        [
            [
                ("Cy", "I planted tomatoes and basil in the raised bed"),
                ("Dee", "Where did the wood come from?"),
                ("Cy", "Reclaimed oak from the old barn"),
                ("Dee", "Oak lasts for years"),
            ],
            [
                ("Cy", "The tomatoes are finally red"),
                ("Dee", "Save me a few for the salad"),
                ("Cy", "Slugs ate half of the basil"),
                ("Dee", "Try copper tape around the bed"),
            ],
        ],
        speakers=("Cy", "Dee"),
    ),
    FAMILY: realtalk_chat(
        [
            [
                ("Eve", "My sister moved to Lisbon last month"),
                ("Fay", "Lisbon! Does she like it?"),
                ("Eve", "She loves the trams and the pastries"),
                ("Fay", "We should visit her in June"),
            ],
            [
                ("Eve", "I booked the flights to Lisbon for June 12"),
                ("Fay", "I will find a hotel near the river"),
                ("Eve", "My sister recommended Alfama"),
                ("Fay", "Alfama it is"),
            ],
        ],
        speakers=("Eve", "Fay"),
    ),
}


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> tuple[Path, Path]:
    """(data folder, NM_HOME) with the three chats built by ``narrative-mirror build``."""
    root = tmp_path_factory.mktemp("across")
    data, nm_home = root / "chats", root / "home"
    for name, chat in CHATS.items():
        write_chat(data, name, chat)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NM_HOME", str(nm_home))
        assert main(["build", "--data", str(data)]) == 0
    return data, nm_home


@pytest.fixture
def built(home, monkeypatch) -> Path:
    data, nm_home = home
    monkeypatch.setenv("NM_HOME", str(nm_home))
    return data


def _cli(capsys, argv: list[str]) -> tuple[int, dict, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


# -- selection ------------------------------------------------------------------------------------
def test_select_chats_expands_globs_within_what_may_be_read():
    chats = [FAMILY, GARDEN, BAKERY]
    assert select_chats("team_*", chats) == [BAKERY, GARDEN]
    assert select_chats(f"{GARDEN}, family_*", chats) == [GARDEN, FAMILY]
    assert select_chats(["*"], chats, lambda c: c.startswith("team_")) == [BAKERY, GARDEN]
    with pytest.raises(NoChatMatches, match=r"no chat matches 'family_\*'"):
        select_chats("family_*", chats, lambda c: c.startswith("team_"))
    assert searched_label([BAKERY, GARDEN]) == f"{BAKERY},{GARDEN}"
    many = searched_label([f"chat_{i:03d}_" + "x" * 40 for i in range(10)])
    assert len(many) <= 200 and many.endswith(",+7 more") and many.count(",") == 3


# -- the command line ----------------------------------------------------------------------------
def test_search_a_glob_ranks_the_right_chats_messages_and_names_each_chat(built, capsys):
    code, out, _ = _cli(
        capsys, ["search", "--data", str(built), "--chat", "team_*", "-k", "3", "--json", "rye bread loaves"]
    )
    assert code == 0 and out["chats"] == [BAKERY, GARDEN]
    assert [(h["chat"], h["id"]) for h in out["hits"]] == [(BAKERY, "D2:3"), (BAKERY, "D1:4"), (BAKERY, "D1:1")]


def test_search_a_comma_list_and_all(built, capsys):
    code, out, _ = _cli(
        capsys,
        [
            "search",
            "--data",
            str(built),
            "--chat",
            f"{GARDEN},{FAMILY}",
            "-k",
            "2",
            "--json",
            "Which wood is the raised bed made of?",
        ],
    )
    assert code == 0 and out["chats"] == [GARDEN, FAMILY]
    assert [(h["chat"], h["id"]) for h in out["hits"]] == [(GARDEN, "D1:1"), (GARDEN, "D1:2")]
    code, out, _ = _cli(capsys, ["search", "--data", str(built), "--all", "-k", "1", "--json", "flights to Lisbon"])
    assert code == 0 and out["chats"] == [FAMILY, BAKERY, GARDEN]
    assert [(h["chat"], h["id"]) for h in out["hits"]] == [(FAMILY, "D2:1")]


def test_a_glob_matching_nothing_exits_2_naming_it(built, capsys):
    code, out, err = _cli(capsys, ["search", "--data", str(built), "--chat", "slack_*", "--json", "rye"])
    assert code == 2 and out["problems"] == ["no chat matches 'slack_*'"]
    assert "no chat matches 'slack_*'" in err
    code, out, _ = _cli(capsys, ["arc", "--data", str(built), "--chat", "team_*", "--json", "How did it go?"])
    assert code == 2 and "answers about one chat" in out["problems"][0]


def test_ask_all_answers_from_the_right_chat_with_its_evidence_named(built, capsys):
    code, out, _ = _cli(
        capsys, ["ask", "--data", str(built), "--all", "--json", "Which city did Eve's sister move to?"]
    )
    assert code == 0
    assert {e["chat"] for e in out["evidence"]} == {FAMILY}
    assert (FAMILY, "D1:1") in [(e["chat"], e["id"]) for e in out["evidence"]]
    assert "Lisbon" in out["answer"]
    assert out["chat_file"].split(",")[0] == FAMILY
    assert all("/" in r["id"] for r in out["trace"]["reranked"])  # message ids: chat/local id


def test_ask_one_chat_names_its_chat_in_every_evidence_item(built, capsys):
    code, out, _ = _cli(capsys, ["ask", "--data", str(built), "--chat", BAKERY, "--json", "Where does Ana work?"])
    assert code == 0 and out["evidence"]
    assert {e["chat"] for e in out["evidence"]} == {BAKERY}
    assert all(":" in r["id"] and "/" not in r["id"] for r in out["trace"]["reranked"])  # one chat: unchanged


# -- the API, a token scoped to two of the three chats ---------------------------------------------
@pytest.fixture
def scoped(built, tmp_path, embedder):
    """(client, the team token, the family token, event log) over the built home."""
    from resources import runtime

    tokens = tmp_path / "tokens.json"
    team = add_token(tokens, "team", ["team_*"])
    family = add_token(tokens, "family", [FAMILY])
    retriever = runtime.retriever(runtime.index_from_environment(), embedder)
    event_log = runtime.event_log(retriever)
    app = create_app(retriever, event_log, runs_root=tmp_path / "runs", tokens=load_tokens(tokens))
    with TestClient(app, base_url=LOCAL) as client:
        yield client, {"Authorization": f"Bearer {team}"}, {"Authorization": f"Bearer {family}"}, event_log


def test_api_search_over_a_glob_and_the_token_sees_only_its_chats(scoped):
    client, team, family, _ = scoped
    found = client.get("/api/memory/search", params={"q": "rye bread loaves", "chats": "*", "k": 3}, headers=team)
    assert found.status_code == 200
    body = found.json()
    assert body["meta"]["chats"] == [BAKERY, GARDEN]
    assert [(h["chat"], h["id"]) for h in body["hits"]] == [(BAKERY, "D2:3"), (BAKERY, "D1:4"), (BAKERY, "D1:1")]
    assert sorted(body["evidence_paths"]) == [BAKERY, GARDEN]
    # the family token asking the same sees only its chat
    own = client.get("/api/memory/search", params={"q": "Lisbon", "chats": "*", "k": 2}, headers=family).json()
    assert own["meta"]["chats"] == [FAMILY] and {h["chat"] for h in own["hits"]} == {FAMILY}
    # one chat, as before: its hits name it
    one = client.get("/api/memory/search", params={"q": "rye", "chat": BAKERY, "k": 1}, headers=team).json()
    assert one["meta"]["chat"] == BAKERY and one["hits"][0]["chat"] == BAKERY


def test_api_errors_do_not_tell_a_scoped_token_that_other_chats_exist(scoped):
    client, team, _, _ = scoped
    search = "/api/memory/search"
    exists = client.get(search, params={"q": "Lisbon", "chats": "family_*"}, headers=team)
    missing = client.get(search, params={"q": "Lisbon", "chats": "nothing_*"}, headers=team)
    assert (exists.status_code, missing.status_code) == (404, 404)
    assert exists.json() == {"error": {"field": "chats", "message": "no chat you may read matches 'family_*'"}}
    assert missing.json()["error"]["message"] == "no chat you may read matches 'nothing_*'"
    named = client.get(search, params={"q": "Lisbon", "chats": f"team_*,{FAMILY}"}, headers=team)
    unknown = client.get(search, params={"q": "Lisbon", "chats": "team_*,no_such_chat"}, headers=team)
    assert (named.status_code, unknown.status_code) == (403, 403) and named.json() == unknown.json()
    for body in ({"chats": ["family_*"], "question": "Where?"}, {"chats": [FAMILY], "question": "Where?"}):
        refused = client.post("/api/ask", json=body, headers=team)
        assert refused.status_code in (403, 404) and FAMILY not in refused.text
    both = client.get(search, params={"q": "x", "chat": BAKERY, "chats": "*"}, headers=team)
    assert both.status_code == 400 and both.json()["error"]["field"] == "chats"


def test_api_ask_all_within_the_token_and_its_event_names_the_chats_searched(scoped):
    client, team, family, event_log = scoped
    answer = client.post(
        "/api/ask", json={"chats": ["*"], "question": "Which city did Eve's sister move to?"}, headers=team
    )
    assert answer.status_code == 200
    text = answer.text
    assert FAMILY not in text and "Lisbon" not in text and "Alfama" not in text
    body = answer.json()
    assert body["evidence"] and {e["chat"] for e in body["evidence"]} <= {BAKERY, GARDEN}
    event_log.flush()
    (event,) = [e for e in event_log.events().to_dicts() if e["event_id"] == body["event_id"]]
    assert event["chat_file"] == f"{BAKERY},{GARDEN}"
    assert set(json.loads(event["counts_per_source"])) == {f"chat:{BAKERY}", f"chat:{GARDEN}"}
    assert all(i.split("/")[0] in (BAKERY, GARDEN) for i in event["returned_ids"])
    right = client.post(
        "/api/ask", json={"chats": ["*"], "question": "Which city did Eve's sister move to?"}, headers=family
    ).json()
    assert (FAMILY, "D1:1") in [(e["chat"], e["id"]) for e in right["evidence"]]


def test_people_read_each_messages_chat_when_an_answer_or_search_spans_several(capsys):
    from cli.printers import print_human

    print_human(
        "search",
        {
            "chats": [BAKERY, GARDEN],
            "count": 1,
            "hits": [
                {
                    "chat": BAKERY,
                    "id": "D2:3",
                    "speaker": "Ana",
                    "text": "I baked forty loaves of rye",
                    "timestamp": "2024-03-02T09:02:00",
                }
            ],
        },
    )
    print_human(
        "ask",
        {
            "answer": "forty",
            "chat_file": f"{BAKERY},{GARDEN}",
            "unknowns": [],
            "route": "direct",
            "profile": "fast",
            "stop_reason": "coverage_met",
            "degraded": False,
            "evidence": [
                {"chat": BAKERY, "id": "D2:3", "text": "Ana: I baked forty loaves of rye", "point": "grade 0.90"}
            ],
        },
    )
    assert capsys.readouterr().out.splitlines() == [
        "1 messages from 2 chats:",
        f"  [{BAKERY}/D2:3] Sat 2 Mar 2024 09:02  Ana: I baked forty loaves of rye",
        "Answer: forty",
        "Evidence:",
        f"  [{BAKERY}/D2:3] Ana: I baked forty loaves of rye",
        "      -> grade 0.90",
        "Unknowns: none",
        "(route direct, profile fast, stop: coverage_met)",
    ]


def test_the_chat_gate_comes_from_retrieval_toml(tmp_path, monkeypatch):
    """``gated`` weighs chats by retrieval.toml's [across_chats]: with the packaged name_weight, the
    chat whose people the query names leads although its messages are a little farther."""
    import types
    from datetime import datetime

    import numpy as np

    from narrative_mirror import settings
    from narrative_mirror.across_chats import merge
    from narrative_mirror.retrieval.records import Hit

    def hit(chat: str) -> Hit:
        return Hit(
            local_id="D1:0",
            message_id=f"{chat}/D1:0",
            position=0,
            session=1,
            speaker="Ana",
            text="hi",
            timestamp=datetime(2024, 1, 1),
            score=1.0,
        )

    # Chat "near" holds the closer message (cosine 1.0); chat "named" one at cosine 0.9.
    vectors = {"near": np.array([[1.0, 0.0]]), "named": np.array([[0.9, np.sqrt(1 - 0.81)]])}

    def leader() -> str:
        retriever = types.SimpleNamespace(
            config=settings.load_config("retrieval"),
            chat=lambda chat: types.SimpleNamespace(row_of={"D1:0": 0}, vectors=vectors[chat]),
        )
        merged = merge(
            retriever,
            "q",
            {"near": [hit("near")], "named": [hit("named")]},
            2,
            "gated",
            qvec=np.array([1.0, 0.0]),
            named={"named": 1},
        )
        return merged[0].chat

    assert leader() == "named"  # exp(-0.1 / 0.2 + 2.0) > exp(0)
    text = (settings.DEFAULT_CONFIG_DIR / "retrieval.toml").read_text(encoding="utf-8")
    assert "name_weight = 2.0\n" in text
    (tmp_path / "retrieval.toml").write_text(
        text.replace("name_weight = 2.0\n", "name_weight = 0.1\n"), encoding="utf-8"
    )
    monkeypatch.setenv("NM_CONFIG_DIR", str(tmp_path))
    assert leader() == "near"  # exp(-0.1 / 0.2 + 0.1) < exp(0)
