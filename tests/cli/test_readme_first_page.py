"""The README's commands work from a clean clone: its first command-line block, run as written
(each line through bash, ``NM`` as the block sets it) in a folder with no data beside it, on a
fresh NM_HOME, exits 0 for every command, prints no model-loading bar and no warning about the
packaged demo, and says what it should (the demo chats listed, then built; one answer shape); then
its Python block and its HTTP block on the home those commands built. Its "Bring your own chats"
block is the one tests/cli/test_bring_your_own_chats.py runs on real exports.

Marked slow: seven command processes that build the three demo chats take about 2 min of CPU
(6 min 50 s of wall time on the shared 2-core machine under load, 2026-11-25)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from loopback import free_port

REPO = Path(__file__).resolve().parents[2]


def first_page_block(readme: str) -> list[str]:
    """The command lines of the first code block under "## The command line"."""
    section = readme.split("\n## The command line\n", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def block_under(readme: str, heading: str, language: str) -> str:
    """The first ``language`` code block under ``## heading``."""
    section = readme.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.search(rf"```{language}\n(.*?)```", section, re.S).group(1)


def test_the_bring_your_own_chats_block_is_the_one_the_doc_test_runs():
    readme = block_under((REPO / "README.md").read_text(encoding="utf-8"), "Bring your own chats", "sh")
    doc = (REPO / "docs" / "bring-your-own-chats.md").read_text(encoding="utf-8").split("## 2.", 1)[1]
    doc_block = re.search(r"```sh\n(.*?)```", doc, re.S).group(1)
    assert readme.split() and readme.strip().splitlines() == doc_block.strip().splitlines()


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
        ("demo_garden_Mara_Theo", True, None),
        ("demo_harbor_Lena_Sam", True, None),
        ("demo_marathon_Ines_Kofi", True, None),
    ]

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

    # The Python block, as written, on the home the commands built.
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    python = subprocess.run(
        [sys.executable, "-c", block_under(readme, "Python", "python")],
        cwd=clone,
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert python.returncode == 0, python.stderr[-3000:]
    printed_json = python.stdout.splitlines()[1]
    assert printed_json.startswith("{'question': 'Where did the wood") and "'evidence': [" in printed_json

    # The HTTP block: its `serve` line on a free port, then each curl line against it.
    http = [line for line in block_under(readme, "HTTP", "bash").replace("\\\n", " ").splitlines() if line.strip()]
    assert http[0].startswith("$NM serve --port 8000 &")
    port = free_port()
    server = subprocess.Popen(
        ["bash", "-c", f"exec .venv/bin/narrative-mirror serve --port {port}"],
        cwd=clone,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 300
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=10).read()
                break
            except OSError:
                assert server.poll() is None and time.time() < deadline, server.stderr.read()[-3000:]
                time.sleep(0.5)
        search, ask = (
            subprocess.run(
                ["bash", "-c", line.replace(":8000", f":{port}")], capture_output=True, text=True, timeout=300
            )
            for line in http[1:]
        )
        assert search.returncode == 0 and json.loads(search.stdout)["hits"], search.stdout[-2000:]
        assert ask.returncode == 0 and {"answer", "evidence"} <= set(json.loads(ask.stdout)), ask.stdout[-2000:]
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
