"""`narrative-mirror chats`: the chats of a data folder and whether each is built (and why not),
without Dagster; and the one line a data folder without its ARC cases gets on every command."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from chat_factory import small_chat, write_chat

from cli import stamp
from cli.main import main
from narrative_mirror import settings

NEVER = "never built in this home: `build` builds it, and so does the first question about it"


def _chats(capsys, argv) -> dict:
    assert main(["chats", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_chats_lists_the_packaged_demo_without_a_data_folder(capsys):
    out = _chats(capsys, [])
    assert (out["data"], out["arcs"]) == (str(settings.DEMO_DATA_DIR), str(settings.DEMO_ARCS_DIR))
    assert out["warnings"] == [] and out["problems"] == []
    assert [
        (c["chat"], c["participants"], c["messages"], c["questions"], c["first"], c["last"], c["built"], c["why_not"])
        for c in out["chats"]
    ] == [
        ("demo_garden_Mara_Theo", ["Mara", "Theo"], 95, 18, "2024-04-02", "2024-04-28", False, NEVER),
        ("demo_harbor_Lena_Sam", ["Lena", "Sam"], 86, 18, "2024-06-03", "2024-06-30", False, NEVER),
        ("demo_marathon_Ines_Kofi", ["Ines", "Kofi"], 86, 18, "2024-05-02", "2024-05-26", False, NEVER),
    ]


def test_why_a_chat_is_not_built_names_what_changed_or_what_is_wrong(tmp_path, capsys):
    data = tmp_path / "data"
    good = write_chat(data, "good", small_chat())
    (data / "broken.json").write_text("{not json", encoding="utf-8")
    home = Path(os.environ["NM_HOME"])
    stamp.write(home, "good", stamp.sources_now(home, good), {"messages": 8})  # as a build of `good` leaves it
    chat = small_chat()
    chat["session_1"][0]["clean_text"] = "Edited after the build"
    write_chat(data, "good", chat)
    rows = {c["chat"]: c for c in _chats(capsys, ["--data", str(data)])["chats"]}
    assert rows["good"]["why_not"] == "the chat file changed since it was built: the next command rebuilds it"
    assert rows["good"]["messages"] == 8 and rows["good"]["built"] is False
    assert (
        rows["broken"]["why_not"]
        == "cannot be read: broken.json: invalid JSON at line 1 column 2: Expecting property name enclosed in double quotes"
    )


def test_a_data_folder_without_its_arcs_says_so_in_one_line(tmp_path, capsys):
    copy = tmp_path / "chats"
    shutil.copytree(settings.DEMO_DATA_DIR, copy)  # copied without its chats_arcs sibling
    line = (
        f"no ARC cases for {copy}: no *.arcs.json in it and no chats_arcs folder beside it "
        "(--arcs or NM_ARCS_DIR names one); ARC evaluation has no cases"
    )
    out = _chats(capsys, ["--data", str(copy)])
    assert out["arcs"] is None and out["warnings"] == [line]
    # Every command that reads the folder says it too (here ingest: no ARC case read).
    write_chat(tmp_path / "mine", "good", small_chat())
    assert main(["ingest", "--data", str(tmp_path / "mine"), "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    mine = tmp_path / "mine"
    line = line.replace(str(copy), str(mine)).replace("no chats_arcs", "no mine_arcs")
    assert out["warnings"].count(line) == 1 and out["arc_cases"] == 0
    assert captured.err.count(f"narrative-mirror ingest: warning: {line}") == 1


def test_chats_lists_every_chat_of_every_export_by_readable_key_name_people_and_days_in_its_zone(tmp_path, capsys):
    import sys
    from datetime import UTC, datetime

    from fixtures.realistic_exports import slack, telegram, whatsapp_ios_zip

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "narrative_mirror" / "exports"))
    import writers

    data = tmp_path / "data"
    data.mkdir()
    expected = [whatsapp_ios_zip(data), telegram(data), *slack(data)]
    late = [
        ("Aroha", datetime(2024, 6, 13, 20, 0, tzinfo=UTC), "Kia ora from Auckland", None),
        ("Tama", datetime(2024, 6, 13, 21, 0, tzinfo=UTC), "Morning!", None),
    ]
    (data / "nz").mkdir()
    writers.telegram(late, data / "nz", tz="Pacific/Auckland", title="Whānau", chat_id=99)
    out = _chats(capsys, ["--data", str(data)])
    rows = {c["chat"]: c for c in out["chats"]}
    assert sorted(rows) == sorted([c.key for c in expected] + ["telegram_whanau"]) and out["problems"] == []
    assert out["warnings"] == []  # app exports are nobody's evaluation set: no word about missing ARC cases
    for chat in expected:
        row = rows[chat.key]
        assert (row["name"], row["format"], row["built"], row["why_not"]) == (chat.name, chat.format, False, NEVER)
        assert len(row["participants"]) == len(chat.people) and row["messages"] > 20
    assert rows["whatsapp_family_trip"]["participants"] == ["Ana Ruiz", "Ben Okafor", "Chloé Martin", "Dev Patel"]
    # 20:00 and 21:00 UTC on the 13th are the morning of the 14th in Auckland, where it was written.
    nz = rows["telegram_whanau"]
    assert (nz["name"], nz["messages"], nz["first"], nz["last"], nz["tz"]) == (
        "Whānau",
        2,
        "2024-06-14",
        "2024-06-14",
        "UTC+12:00",
    )
