"""What the CLI and the API print stays bounded and quiet: an error line quoting 2 MB is cut and says
how long it was (terminal, --json, API body); a reader that goes away (`| head -1`) ends the
command without a traceback (the real console script)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from api.requests import error_response
from cli.main import EXIT_BROKEN_PIPE, main
from narrative_mirror.safe_text import MAX_LINE_CHARS

SCRIPT = Path(sys.executable).with_name("narrative-mirror")
HUGE = "x" * 2_000_000


def test_an_error_line_quoting_2_mb_is_cut_and_says_its_length(tmp_path, capsys):
    tokens = str(tmp_path / "tokens.json")
    assert main(["token", "add", "--tokens", tokens, "--name", HUGE, "--chat", "a"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert len(line) < MAX_LINE_CHARS + 100 and line.endswith("characters in all]") and "2,000,1" in line
    assert main(["token", "add", "--tokens", tokens, "--name", HUGE, "--chat", "a", "--json"]) == 2
    captured = capsys.readouterr()
    [problem] = json.loads(captured.out)["problems"]
    assert len(problem) < MAX_LINE_CHARS + 100 and len(captured.err) < MAX_LINE_CHARS + 200
    body = json.loads(error_response(400, "q", f"no chat {HUGE}").body)
    assert (
        len(body["error"]["message"]) < MAX_LINE_CHARS + 100
        and "2,000,008 characters in all" in body["error"]["message"]
    )


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    command = subprocess.Popen(
        [str(SCRIPT), "token", "add", "--tokens", str(tmp_path / "t.json"), "--name", "ana", "--chat", "a"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    command.stdout.close()  # as `| head -1` does once it has its line
    err = command.stderr.read().decode()
    assert command.wait(timeout=120) == EXIT_BROKEN_PIPE
    assert err == ""  # no traceback, no "BrokenPipeError"
