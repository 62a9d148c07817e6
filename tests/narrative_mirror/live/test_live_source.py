"""A live chat as a source of the asset graph: found beside the data folder's chat files, read
as a chat, refused when a chat file has its name, built by Dagster with lineage."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from narrative_mirror.chats import load_chat
from narrative_mirror.live.log import LiveLog
from narrative_mirror.live.source import find_chats
from narrative_mirror.settings import DEMO_DATA_DIR

BATCH = [
    {
        "id": "a1",
        "author": "Ines",
        "text": "The half marathon starts at the bridge.",
        "timestamp": "2025-03-01T08:00:00Z",
    },
    {"author": "Kofi", "text": "We take the early ferry.", "timestamp": "2025-03-01T09:01:00+01:00"},
]


def home() -> Path:
    from resources import environment

    environment.hand_to_library()
    return environment.nm_home()


def test_a_live_chat_is_found_and_read_like_a_chat_file(tmp_path):
    LiveLog(home() / "live").append("run_Ines_Kofi", BATCH)
    (tmp_path / "data").mkdir()
    chats, problems = find_chats(tmp_path / "data", home=home())
    assert ({k: (c.path, c.format) for k, c in chats.items()}, problems) == (
        {"run_Ines_Kofi": (home() / "live" / "run_Ines_Kofi.jsonl", "live")},
        [],
    )
    chat = load_chat(chats["run_Ines_Kofi"].path, chat_file="run_Ines_Kofi")
    assert (chat.format, chat.speakers, chat.local_ids) == ("live", ["Ines", "Kofi"], ["a1", "L1"])
    assert chat.messages["message_id"].to_list() == ["run_Ines_Kofi/a1", "run_Ines_Kofi/L1"]
    assert [str(t) for t in chat.messages["timestamp"]] == ["2025-03-01 08:00:00", "2025-03-01 08:01:00"]
    assert chat.messages["tz"].to_list() == ["UTC", "UTC"]
    assert [str(t) for t in chat.messages["utc_time"]] == ["2025-03-01 08:00:00+00:00", "2025-03-01 08:01:00+00:00"]


def test_a_chat_file_and_a_live_chat_with_one_name_are_both_refused(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(DEMO_DATA_DIR, data)
    name = sorted(p.name[:-5] for p in data.glob("*.json") if not p.name.endswith(".arcs.json"))[0]
    LiveLog(home() / "live").append(name, BATCH)
    files, problems = find_chats(data, home=home())
    assert name not in files and len(files) == 2
    assert problems == [
        f"{data / (name + '.json')}: a live chat of this home has the same name ({name!r}): "
        'neither is built until one is renamed or you add with --replace-file-chat (API: "replace_file_chat": '
        "true) to make the live chat replace it"
    ]


@pytest.mark.slow
def test_build_brings_a_live_chat_up_to_date_through_dagster(tmp_path, capsys, embedder):
    from cli.main import main
    from narrative_mirror.index_store import IndexStore
    from narrative_mirror.live.memory import LiveMemory

    LiveLog(home() / "live").append("run_Ines_Kofi", BATCH)
    (tmp_path / "data").mkdir()
    assert main(["build", "--data", str(tmp_path / "data"), "--json"]) == 0
    first = json.loads(capsys.readouterr().out)["per_file"]["run_Ines_Kofi"]
    assert (first["messages"], first["encoded_messages"], first["ran"][-1]) == (2, 2, "lancedb_index")
    # added live (searchable at once): more index rows than the build wrote is no damage to repair
    live = LiveMemory(home() / "live", IndexStore(str(home() / "lancedb")), embedder)
    live.add("run_Ines_Kofi", [{"author": "Ines", "text": "Race day!", "timestamp": "2025-03-15T07:00:00Z"}])
    assert main(["build", "--data", str(tmp_path / "data"), "--json"]) == 0
    out = capsys.readouterr()
    assert "repair" not in out.err
    second = json.loads(out.out)["per_file"]["run_Ines_Kofi"]
    assert second["ran"][0] == "messages" and (second["messages"], second["encoded_messages"]) == (3, 1)
    assert main(["build", "--data", str(tmp_path / "data"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["per_file"]["run_Ines_Kofi"]["ran"] == []
