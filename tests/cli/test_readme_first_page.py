"""The README's first page works from a clean clone: its first command-line block, run as written
(each line through bash, ``NM`` as the block sets it) in a folder with no data beside it, on a
fresh NM_HOME, exits 0 for every command, prints no model-loading bar and no warning about the
packaged demo, and says what it should (the demo chats listed, then built; one answer shape).

Marked slow: seven command processes that build the three demo chats take about 2 min of CPU
(6 min 50 s of wall time on the shared 2-core machine under load, 2026-11-25)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def first_page_block(readme: str) -> list[str]:
    """The command lines of the first code block under "## The command line"."""
    section = readme.split("\n## The command line\n", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def clone_folder(tmp_path: Path) -> Path:
    """A folder standing for a clone after set-up: ``.venv/bin/narrative-mirror`` runs this
    working tree's command line; no ``../shared`` beside it."""
    clone = tmp_path / "clone"
    script = clone / ".venv" / "bin" / "narrative-mirror"
    script.parent.mkdir(parents=True)
    script.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m cli.main "$@"\n', encoding="utf-8")
    script.chmod(0o755)
    assert not (clone.parent / "shared").exists()
    return clone


@pytest.mark.slow
def test_the_first_page_commands_run_as_written_from_a_clone(tmp_path):
    lines = first_page_block((REPO / "README.md").read_text(encoding="utf-8"))
    assert lines[0] == "NM=.venv/bin/narrative-mirror" and all(line.startswith("$NM ") for line in lines[1:])
    clone = clone_folder(tmp_path)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    assert "NM_DATA_DIR" not in env and "NM_HOME" in env  # the fresh home of tests/conftest.py
    runs = []
    for line in lines[1:]:
        proc = subprocess.run(["bash", "-c", f"{lines[0]}\n{line}"], cwd=clone, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, (line, proc.stderr[-3000:])
        # No model-loading bar, no warning (the packaged demo's gold is clean), no traceback.
        assert "Loading weights" not in proc.stderr and "warning" not in proc.stderr.lower(), (line, proc.stderr)
        assert "Traceback" not in proc.stderr
        runs.append((line, proc.stdout))

    chats_before = runs[0][1].splitlines()
    assert chats_before[0].startswith("3 chats in ") and chats_before[0].endswith("chats_arcs)")
    rows = [re.split(r"\s{2,}", row) for row in chats_before[2:]]
    never = "not built: never built in this home: `build` builds it, and so does the first question about it"
    assert rows == [
        ["demo_garden_Mara_Theo", "Mara, Theo", "95", "18", "2024-04-02 .. 2024-04-28", never],
        ["demo_harbor_Lena_Sam", "Lena, Sam", "86", "18", "2024-06-03 .. 2024-06-30", never],
        ["demo_marathon_Ines_Kofi", "Ines, Kofi", "86", "18", "2024-05-02 .. 2024-05-26", never],
    ]
    chats_after = json.loads(runs[-1][1])
    assert [(c["chat"], c["built"], c["why_not"]) for c in chats_after["chats"]] == [
        ("demo_garden_Mara_Theo", True, None), ("demo_harbor_Lena_Sam", True, None),
        ("demo_marathon_Ines_Kofi", True, None)]

    answer = json.loads(next(out for line, out in runs if "--json" in line and " ask " in line))
    assert {"answer", "evidence", "unknowns", "route", "profile", "claims", "event_id"} <= set(answer)
    assert not {"Answer", "Evidence", "Unknowns"} & set(answer)
    assert all(e["speaker"] in ("Lena", "Sam") and e["timestamp"].startswith("2024-06-") for e in answer["evidence"])

    # People read the evidence as dated messages with their authors.
    asked = next(out for line, out in runs if " ask " in line and "--json" not in line).splitlines()
    evidence = asked[asked.index("Evidence:") + 1]
    assert re.fullmatch(r"  \[D\d+:\d+\] \w{3} \d{1,2} Apr 2024 \d\d:\d\d  (Mara|Theo): .+", evidence), evidence
    story = next(out for line, out in runs if " arc " in line).splitlines()
    assert re.fullmatch(r"1\. \d{1,2} Apr 2024: .*[a-z]+ [a-z]+ [a-z]+.*", story[0]), story[0]
    assert re.fullmatch(r"   \[D\d+:\d+\] \w{3} \d{1,2} Apr 2024 \d\d:\d\d  (Mara|Theo): .+", story[1]), story[1]
