"""A live chat shows wherever chat files do: ``chats`` lists it (format live, messages, built or
not), and Dagster's source observation of it gives a new data version for each accepted batch
(none for a batch stored before)."""

from __future__ import annotations

import json

import dagster as dg

from assets.sources.assets import chat_file, observe_sources, record_observation
from assets.versioning import DATA_VERSION_TAG
from cli.main import main
from narrative_mirror.live.log import LiveLog
from resources import environment
from resources.dagster_resources import ChatDataResource

CHAT = "run_Ines_Kofi"
FIRST = [
    {
        "id": "a1",
        "author": "Ines",
        "text": "The half marathon starts at the bridge.",
        "timestamp": "2025-03-01T08:00:00Z",
    },
    {"author": "Kofi", "text": "We take the early ferry.", "timestamp": "2025-03-01T09:01:00+01:00"},
]
SECOND = [{"author": "Ines", "text": "Race day!", "timestamp": "2025-03-15T07:00:00Z"}]
NEVER = "never built in this home: `build` builds it, and so does the first question about it"


def observed(instance: dg.DagsterInstance, data) -> list[str]:
    """The new data versions the source observation records for the live chat (as the daemon's
    sensor does: reported to the instance)."""
    found = observe_sources(instance, ChatDataResource(data_dir=str(data), home=str(environment.nm_home())))
    record_observation(instance, found)
    return [
        o.tags[DATA_VERSION_TAG] for o in found.observations if o.asset_key == chat_file.key and o.partition == CHAT
    ]


def test_chats_lists_a_live_chat_and_each_accepted_batch_is_a_new_data_version(tmp_path, capsys):
    from resources import environment

    data = tmp_path / "data"
    data.mkdir()
    log = LiveLog(environment.nm_home() / "live")
    instance = dg.DagsterInstance.ephemeral()
    log.append(CHAT, FIRST)
    [first] = observed(instance, data)
    assert main(["chats", "--data", str(data), "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)["chats"]
    assert row == {
        "chat": CHAT,
        "name": CHAT,
        "tz": None,
        "file": str(environment.nm_home() / "live" / f"{CHAT}.jsonl"),
        "format": "live",
        "participants": ["Ines", "Kofi"],
        "messages": 2,
        "questions": 0,
        "first": "2025-03-01",
        "last": "2025-03-01",
        "built": False,
        "why_not": NEVER,
    }
    log.append(CHAT, FIRST)  # stored before: nothing new, no new version
    assert observed(instance, data) == []
    log.append(CHAT, SECOND)
    [second] = observed(instance, data)
    log.append(CHAT, [{**SECOND[0], "text": "Race day, finally!"}])
    [third] = observed(instance, data)
    assert len({first, second, third}) == 3
    assert main(["chats", "--data", str(data)]) == 0
    assert f"{CHAT} (live)" in capsys.readouterr().out
