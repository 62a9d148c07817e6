"""One home, several data folders: a chat this home built from another folder is left out of
`--all` with one line naming that folder and what to do, never as a `--chat` nobody passed."""

from __future__ import annotations

import json

from chat_factory import small_chat, write_chat

from cli.main import main


def test_all_over_another_folder_leaves_out_the_chat_built_from_the_first_and_says_why(tmp_path, capsys):
    first, other = tmp_path / "first", tmp_path / "other"
    write_chat(first, "shared", small_chat())
    assert main(["build", "--data", str(first), "--json"]) == 0
    capsys.readouterr()
    changed = small_chat()
    changed["session_1"][0]["clean_text"] = "Another copy of the chat, edited"
    write_chat(other, "shared", changed)
    write_chat(other, "mine", small_chat())

    code = main(["search", "--data", str(other), "--all", "bakery", "--json"])
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert code == 0 and out["chats"] == ["mine"] and "--chat" not in captured.err
    assert out["warnings"] == [
        f"shared left out: {other / 'shared.json'}: chat 'shared' is built on this NM_HOME "
        f"from {first}, whose copy differs: not rebuilt from this folder (give this folder "
        "its own NM_HOME, or rename one of the two)"
    ]
    # Asked for by name, it is that line, as bad input (exit 2).
    assert main(["search", "--data", str(other), "--chat", "shared", "bakery"]) == 2
    assert f"is built on this NM_HOME from {first}" in capsys.readouterr().err
