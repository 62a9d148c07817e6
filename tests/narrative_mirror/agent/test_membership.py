"""Membership questions answered from system lines, on exports built by the real pipeline
(``build``, real Dagster and embedder): a WhatsApp iOS group with "X added Y", "Y left" and the
group's creation, and a Telegram group with service messages. Ordinary questions never get a
system line as evidence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main
from narrative_mirror.agent.membership import parse_question, read_event

LRM = "\u200e"
# A WhatsApp iOS group export: system lines carry the group's title as author and a left-to-right mark.
WHATSAPP = (
    "\n".join(
        [
            f"[13/05/2024, 09:00:00] Family Trip: {LRM}Ana created group “Family Trip”",
            f"[13/05/2024, 09:00:05] Family Trip: {LRM}Messages and calls are end-to-end encrypted.",
            "[13/05/2024, 09:01:00] Ana: Who wants to plan the trip to the lake in June?",
            "[13/05/2024, 09:03:00] Cleo: Me! I can book the cabin by the water.",
            f"[15/05/2024, 18:20:00] Family Trip: {LRM}Ana added Ben",
            "[15/05/2024, 18:21:00] Ben: Thanks for adding me, I will bring the kayak.",
            "[16/05/2024, 10:00:00] Cleo: The cabin is booked for the second weekend of June.",
            f"[18/05/2024, 20:15:00] Family Trip: {LRM}Cleo added Dina and Eli",
            "[18/05/2024, 20:16:00] Dina: Hi all, I can drive two people to the lake.",
            f"[21/05/2024, 08:00:00] Family Trip: {LRM}Eli left",
            "[21/05/2024, 08:05:00] Ana: Shame Eli can't come, we will miss his grill.",
        ]
    )
    + "\n"
)


def _telegram(folder: Path) -> None:
    def service(i, day, actor, action, **extra):
        return {
            "id": i,
            "type": "service",
            "date": f"2024-05-{day:02d}T10:00:00",
            "actor": actor,
            "actor_id": f"user{ord(actor[0])}",
            "action": action,
            "text": "",
            **extra,
        }

    def message(i, day, author, text):
        return {
            "id": i,
            "type": "message",
            "date": f"2024-05-{day:02d}T11:{i:02d}:00",
            "from": author,
            "from_id": f"user{ord(author[0])}",
            "text": text,
        }

    messages = [
        service(1, 2, "Olga", "create_group", title="Choir"),
        message(2, 2, "Olga", "Rehearsal is on Thursday at the church hall, bring the new scores."),
        service(3, 7, "Olga", "invite_members", members=["Pavel"]),
        message(4, 7, "Pavel", "Thank you, I sing bass and I have the scores already."),
        message(5, 9, "Olga", "The concert is on the first Sunday of June at the town museum."),
        service(6, 12, "Olga", "remove_members", members=["Pavel"]),
        message(7, 12, "Olga", "We need a new bass singer for the concert."),
    ]
    folder.joinpath("result.json").write_text(
        json.dumps({"name": "Choir", "type": "private_group", "id": 77, "messages": messages}), encoding="utf-8"
    )


# (chat key prefix, question, answer, the system line given as evidence)
ASKED = [
    ("whatsapp", "When did Ben join the group?", "15 May 2024", "Ana added Ben"),
    ("whatsapp", "Who added Dina?", "Cleo", "Cleo added Dina and Eli"),
    ("whatsapp", "When did Eli leave the group?", "21 May 2024", "Eli left"),
    ("whatsapp", "Who created the group?", "Ana", "Ana created group “Family Trip”"),
    ("telegram", "Who added Pavel?", "Olga", "Olga added Pavel"),
    ("telegram", "When was Pavel removed?", "12 May 2024", "Olga removed Pavel"),
    ("telegram", "Who created the group?", "Olga", "Olga created the group «Choir»"),
]


@pytest.mark.slow  # two exports built by Dagster and the embedder in a fresh home (about two minutes)
def test_membership_questions_are_answered_from_system_lines(tmp_path, capsys):
    data = tmp_path / "chats"
    (data / "WhatsApp Chat - Family Trip").mkdir(parents=True)
    (data / "WhatsApp Chat - Family Trip" / "_chat.txt").write_text(WHATSAPP, encoding="utf-8")
    (data / "telegram").mkdir()
    _telegram(data / "telegram")
    code = main(["build", "--data", str(data), "--json"])
    built = json.loads(capsys.readouterr().out)
    assert code == 0 and built["built"] == 2, built  # system lines are out of the index, and the check knows it
    chats = {key.split("_")[0]: key for key in built["per_file"]}

    def ask(prefix: str, question: str) -> dict:
        assert main(["ask", "--data", str(data), "--chat", chats[prefix], "--json", question]) == 0
        return json.loads(capsys.readouterr().out)

    for prefix, question, answer, line in ASKED:
        result = ask(prefix, question)
        assert (result["answer"], [e["text"] for e in result["evidence"]]) == (answer, [line]), question
    # An ordinary question is searched as always: no system line is ever its evidence.
    ordinary = ask("whatsapp", "Who will bring the kayak?")
    assert ordinary["evidence"] and not [e for e in ordinary["evidence"] if e["text"] in {a[3] for a in ASKED}]


@pytest.mark.parametrize(
    "question, expected",
    [
        ("When did Ben join the group?", ("join", "Ben", "when")),
        ("when was Dina Moreno added?", ("join", "Dina Moreno", "when")),
        ("Who added Eli to the chat?", ("join", "Eli", "who")),
        ("When did Eli leave?", ("leave", "Eli", "when")),
        ("Who removed Pavel from the group?", ("leave", "Pavel", "who")),
        ("Who created the group?", ("create", "", "who")),
        ("When did Ben join the choir rehearsal as a bass?", ("join", "Ben", "when")),
        ("Who added salt to the soup at Ana's?", ("join", "salt", "who")),
        ("When did Ana harvest the tomatoes?", None),
        ("Where does Ben run?", None),
    ],
)
def test_membership_questions_are_recognized(question, expected):
    found = parse_question(question)
    assert (found.kind, found.person, found.wants) == expected if expected else found is None


@pytest.mark.parametrize(
    "speaker, text, expected",
    [
        ("", "Ana added Ben", ("join", ("Ben",), "Ana")),
        ("", "Cleo added Dina and Eli", ("join", ("Dina", "Eli"), "Cleo")),
        ("", "Eli left", ("leave", ("Eli",), "")),
        ("", "Dee joined using this group's invite link", ("join", ("Dee",), "")),
        ("Olga", "Olga added Pavel, Rita", ("join", ("Pavel", "Rita"), "Olga")),
        ("Rita", "Rita joined the group via invite link from Olga", ("join", ("Rita",), "")),
        ("Pavel", "Pavel left the group", ("leave", ("Pavel",), "")),
        ("Olga", "Olga created the group «Choir»", ("create", (), "Olga")),
        ("", "Messages and calls are end-to-end encrypted.", None),
        # Slack's channel_join / channel_leave lines and Discord's as its reader writes them.
        ("Ana Ruiz", "@Ana Ruiz has joined the channel", ("join", ("Ana Ruiz",), "")),
        ("Ben Okafor", "@Ben Okafor has left the channel", ("leave", ("Ben Okafor",), "")),
        ("quinn", "quinn joined the server.", ("join", ("quinn",), "")),
        ("Ana Ruiz", "@Ana Ruiz set the channel topic: Offsite in June", None),
    ],
)
def test_system_lines_are_read_as_events(speaker, text, expected):
    event = read_event({"speaker": speaker, "text": text})
    assert (event.kind, event.people, event.actor) == expected if expected else event is None


def test_the_answer_reads_the_system_lines_of_the_home_it_is_given(tmp_path):
    """The stored messages layer is found through the ``Home`` passed down (the retriever's), not a
    process-wide folder: another home, or none, answers nothing."""
    from datetime import datetime

    import polars as pl

    from narrative_mirror import storage
    from narrative_mirror.agent.membership import answer
    from narrative_mirror.home import Home

    home, other = Home(tmp_path / "home"), Home(tmp_path / "other")
    lines = pl.DataFrame(
        {
            "local_id": ["m0", "m1", "m2"],
            "position": [0, 1, 2],
            "speaker": ["Olga", "Olga", "Pavel"],
            "text": ["Olga created the group «Choir»", "Rehearsal moves to Tuesday.", "Pavel left the group"],
            "timestamp": [datetime(2024, 5, 1, 9), datetime(2024, 5, 2, 9), datetime(2024, 5, 12, 9)],
            "system": [True, False, True],
        }
    )
    storage.write_frame(storage.frame_path(home.storage, "messages", "choir"), lines)
    found = answer(home, "choir", "Who created the group?", "fast")
    assert (found.answer, [e.id for e in found.evidence]) == ("Olga", ["m0"])
    assert answer(home, "choir", "When did Pavel leave?", "fast").answer == "12 May 2024"
    assert answer(other, "choir", "Who created the group?", "fast") is None
    assert answer(None, "choir", "Who created the group?", "fast") is None
