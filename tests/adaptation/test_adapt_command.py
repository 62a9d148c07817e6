"""``narrative-mirror adapt``: trains the adaptation now, says what it trained on and that the
built chat's vectors are stale; with --if-due and nothing due it keeps the adaptation."""

from __future__ import annotations

import json

import pytest
from chat_factory import small_chat, write_chat

from cli.main import main


def _adapt(capsys, *flags) -> dict:
    code = main(["adapt", *flags, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    return out


def test_adapt_is_refused_while_the_adaptation_is_off(tmp_path, capsys):
    write_chat(tmp_path / "data", "chat_a", small_chat())
    assert main(["adapt", "--data", str(tmp_path / "data"), "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["problems"] == [
        "the adaptation is off: embedding.toml [adaptation] enabled = true turns it on"
    ]


@pytest.mark.slow
def test_adapt_trains_now_and_names_what_became_stale(tmp_path, capsys, adaptation_on):
    data = tmp_path / "data"
    write_chat(data, "chat_a", small_chat())
    assert main(["build", "--data", str(data)]) == 0
    capsys.readouterr()
    trained = _adapt(capsys, "--data", str(data))
    assert trained["retrained"] is True and trained["messages_trained_on"] == 8 and trained["pairs"] == 6
    assert (tmp_path / "nm_home" / "adaptation" / trained["adaptation"] / "top_layers.pt").is_file()
    assert (trained["steps"], trained["stopped_by"]) == (2, "epochs")  # consecutive pairs share a text: 2 batches
    assert trained["stale_chats"] == 1 and trained["per_file"] == {"chat_a": {"stale": "message_embeddings"}}
    # nothing due (same messages): kept; the vectors stay stale until the next build
    kept = _adapt(capsys, "--data", str(data), "--if-due")
    assert kept["retrained"] is False and kept["adaptation"] == trained["adaptation"]
    assert main(["build", "--data", str(data)]) == 0
    capsys.readouterr()
    assert _adapt(capsys, "--data", str(data), "--if-due")["stale_chats"] == 0
