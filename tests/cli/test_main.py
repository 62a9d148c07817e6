"""The narrative-mirror command, end to end through Dagster, as a user runs it."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from chat_factory import small_chat, write_chat

from cli.main import main

CLI = [sys.executable, "-m", "cli.main"]


def _json(capsys, argv) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_ingest_realtalk_reports_the_corpus_counts(realtalk_dir, capsys):
    out = _json(capsys, ["ingest", "--data", str(realtalk_dir), "--json"])
    assert (out["partitions"], out["messages"], out["qa"]) == (10, 8944, 728)
    assert out["arc_cases"] > 0
    assert out["unresolved_evidence"] == sum(f["unresolved_evidence"] for f in out["per_file"].values()) > 0
    # A second run finds everything fresh and redoes nothing.
    main(["ingest", "--data", str(realtalk_dir)])
    assert capsys.readouterr().err.count("up to date") == 10


def test_bad_data_folder_exits_2_with_a_clear_message(tmp_path):
    proc = subprocess.run([*CLI, "ingest", "--data", str(tmp_path / "missing")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "does not exist" in proc.stderr and "Traceback" not in proc.stderr


def test_broken_chat_file_exits_1_naming_the_file(tmp_path):
    write_chat(tmp_path, "good", small_chat())
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    proc = subprocess.run([*CLI, "ingest", "--data", str(tmp_path), "--json"], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "broken.json" in proc.stderr and "Traceback" not in proc.stderr


def test_one_broken_file_does_not_stop_the_others(tmp_path, capsys):
    write_chat(tmp_path, "good", small_chat())
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    assert main(["ingest", "--data", str(tmp_path)]) == 1
    from cli.runner import Runner

    with Runner(data_dir=tmp_path) as runner:
        assert runner.read("messages", "good").height == 8
