"""docs/python.md's example runs as written on a real home: a LanceDB index of a small chat under
``~/.narrative-mirror`` (HOME pointed at a temporary folder), the real embedder, offline agent."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from memory_api_chat import CHAT, build_retriever

from narrative_mirror import Home, Memory
from narrative_mirror.across_chats import searched_label
from narrative_mirror.events.table import find_event

REPO = Path(__file__).resolve().parents[2]


def doc_block() -> str:
    text = (REPO / "docs" / "python.md").read_text(encoding="utf-8")
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)


def test_the_documented_example_runs_on_a_built_home(tmp_path, embedder):
    block = doc_block()
    assert len(block.strip().splitlines()) <= 12
    home = Home.at(tmp_path / ".narrative-mirror")
    build_retriever(home.lancedb, embedder)
    out = subprocess.run(
        [sys.executable, "-c", block],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={
            "HOME": str(tmp_path),
            "PYTHONPATH": str(REPO),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "NM_DEVICE": "cpu",
            "PATH": "/usr/bin:/bin",
        },
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"{CHAT} ") and "rye" in lines[0]  # the best hit for "rye bread"
    evidence = [line for line in lines if line.startswith(f"{CHAT} D")]
    assert len(evidence) >= 4  # three hits and at least one evidence message
    assert any("bak" in line for line in evidence[3:])  # the evidence speaks of her baking


def test_memory_asks_one_chat_and_several_as_the_command_line_does(tmp_path, embedder):
    """One chat: its own ids, the event names the chat; several chats: ids prefixed by the chat
    (``across_chats``), the event names every chat searched."""
    home = Home.at(tmp_path)
    build_retriever(home.lancedb, embedder)
    build_retriever(home.lancedb, embedder, chat_file="other_bakery_Ana_Ben")
    with Memory(home, embedder=embedder) as memory:
        assert memory.chats() == sorted([CHAT, "other_bakery_Ana_Ben"])
        one, one_event = memory.ask([CHAT], "What does Ana bake?", "fast")
        several, several_event = memory.ask(memory.chats(), "What does Ana bake?", "fast")
        merged = memory.search(memory.chats(), "rye bread", k=4)
    assert one.evidence and all(item.chat == CHAT for item in one.evidence)
    assert {item.chat for item in several.evidence} <= set(memory.chats())
    assert {hit.chat for hit in merged.hits} == set(memory.chats())
    # each ask left its event, written when the memory closed: the chat, or the chats searched
    assert find_event(home.lancedb, one_event)["chat_file"] == CHAT
    assert find_event(home.lancedb, several_event)["chat_file"] == searched_label(memory.chats())


def test_build_without_a_builder_refuses_another_home(tmp_path, monkeypatch):
    monkeypatch.setenv("NM_HOME", str(tmp_path / "process_home"))
    memory = Memory.open(tmp_path / "other")
    try:
        memory.build(["x"])
    except ValueError as exc:
        assert "is not this process's home" in str(exc) and str(tmp_path / "other") in str(exc)
    else:
        raise AssertionError("built into a home that is not NM_HOME")
