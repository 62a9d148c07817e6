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
WHATSAPP = "\n".join([
    f"[01/05/2024, 09:00:00] Family Trip: {LRM}Ana created group “Family Trip”",
    f"[01/05/2024, 09:00:05] Family Trip: {LRM}Messages and calls are end-to-end encrypted.",
    "[01/05/2024, 09:01:00] Ana: Who wants to plan the trip to the lake in June?",
    "[01/05/2024, 09:03:00] Cleo: Me! I can book the cabin by the water.",
    f"[03/05/2024, 18:20:00] Family Trip: {LRM}Ana added Ben",
    "[03/05/2024, 18:21:00] Ben: Thanks for adding me, I will bring the kayak.",
    "[04/05/2024, 10:00:00] Cleo: The cabin is booked for the second weekend of June.",
    f"[06/05/2024, 20:15:00] Family Trip: {LRM}Cleo added Dina and Eli",
    "[06/05/2024, 20:16:00] Dina: Hi all, I can drive two people to the lake.",
    f"[09/05/2024, 08:00:00] Family Trip: {LRM}Eli left",
    "[09/05/2024, 08:05:00] Ana: Shame Eli can't come, we will miss his grill.",
]) + "\n"


def _telegram(folder: Path) -> None:
    def service(i, day, actor, action, **extra):
        return {"id": i, "type": "service", "date": f"2024-05-{day:02d}T10:00:00", "actor": actor,
                "actor_id": f"user{ord(actor[0])}", "action": action, "text": "", **extra}

    def message(i, day, author, text):
        return {"id": i, "type": "message", "date": f"2024-05-{day:02d}T11:{i:02d}:00", "from": author,
                "from_id": f"user{ord(author[0])}", "text": text}

    messages = [
        service(1, 2, "Olga", "create_group", title="Choir"),
        message(2, 2, "Olga", "Rehearsal is on Thursday at the church hall, bring the new scores."),
        service(3, 7, "Olga", "invite_members", members=["Pavel"]),
        message(4, 7, "Pavel", "Thank you, I sing bass and I have the scores already."),
        message(5, 9, "Olga", "The concert is on the first Sunday of June at the town museum."),
        service(6, 12, "Olga", "remove_members", members=["Pavel"]),
        message(7, 12, "Olga", "We need a new bass singer for the concert."),
    ]
    folder.joinpath("result.json").write_text(json.dumps(
        {"name": "Choir", "type": "private_group", "id": 77, "messages": messages}), encoding="utf-8")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("membership")
    data = root / "chats"
    (data / "WhatsApp Chat - Family Trip").mkdir(parents=True)
    (data / "WhatsApp Chat - Family Trip" / "_chat.txt").write_text(WHATSAPP, encoding="utf-8")
    (data / "telegram").mkdir()
    _telegram(data / "telegram")
    return data


def _ask(capsys, data: Path, chat_prefix: str, question: str) -> dict:
    assert main(["chats", "--data", str(data), "--json"]) in (0, 2)
    listed = capsys.readouterr().out
    code = main(["build", "--data", str(data), "--json"])
    built = json.loads(capsys.readouterr().out)
    assert code == 0, built
    chat = next(c for c in built["per_file"] if c.startswith(chat_prefix))
    assert main(["ask", "--data", str(data), "--chat", chat, "--json", question]) == 0, listed
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow  # two exports built by Dagster in a fresh home, then asked
@pytest.mark.parametrize("prefix, question, answer, line", [
    ("whatsapp", "When did Ben join the group?", "3 May 2024", "Ana added Ben"),
    ("whatsapp", "Who added Dina?", "Cleo", "Cleo added Dina and Eli"),
    ("whatsapp", "When did Eli leave the group?", "9 May 2024", "Eli left"),
    ("whatsapp", "Who created the group?", "Ana", "Ana created group “Family Trip”"),
    ("telegram", "Who added Pavel?", "Olga", "invite_members: Pavel"),
    ("telegram", "When was Pavel removed?", "12 May 2024", "remove_members: Pavel"),
])
def test_membership_questions_are_answered_from_system_lines(built, capsys, prefix, question, answer, line):
    result = _ask(capsys, built, prefix, question)
    assert result["answer"] == answer
    assert [e["text"].split(": ", 1)[-1] if prefix == "telegram" else e["text"] for e in result["evidence"]] == [line]


@pytest.mark.slow
def test_an_ordinary_question_never_gets_a_system_line(built, capsys):
    result = _ask(capsys, built, "whatsapp", "Who will bring the kayak?")
    assert not [e for e in result["evidence"] if "added" in e["text"] or e["text"].endswith("left")]


@pytest.mark.parametrize("question, expected", [
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
])
def test_membership_questions_are_recognized(question, expected):
    found = parse_question(question)
    assert (found.kind, found.person, found.wants) == expected if expected else found is None


@pytest.mark.parametrize("speaker, text, expected", [
    ("", "Ana added Ben", ("join", ("Ben",), "Ana")),
    ("", "Cleo added Dina and Eli", ("join", ("Dina", "Eli"), "Cleo")),
    ("", "Eli left", ("leave", ("Eli",), "")),
    ("", "Dee joined using this group's invite link", ("join", ("Dee",), "")),
    ("Olga", "invite_members: Pavel, Rita", ("join", ("Pavel", "Rita"), "Olga")),
    ("Olga", "Olga added Pavel", ("join", ("Pavel",), "Olga")),  # the readable form the readers move to
    ("Rita", "join_group_by_link", ("join", ("Rita",), "Rita")),
    ("", "Messages and calls are end-to-end encrypted.", None),
])
def test_system_lines_are_read_as_events(speaker, text, expected):
    event = read_event({"speaker": speaker, "text": text})
    assert (event.kind, event.people, event.actor) == expected if expected else event is None
