"""scripts/ui.py: the Dagster UI and daemon started in the background stop on SIGTERM, with every
process they started (a bare `dg dev &` ignores SIGTERM and SIGINT)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from loopback import free_port

REPO = Path(__file__).resolve().parents[1]


def _descendants(pid: int) -> set[int]:
    """Every living process under ``pid`` (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ui_started_in_the_background_stops_on_sigterm_with_everything_it_started(tmp_path):
    port = free_port()
    home = tmp_path / "nm_home"
    (home / "dagster").mkdir(parents=True)
    env = {**os.environ, "NM_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
    # as `python scripts/ui.py &` from a shell: SIGINT ignored, which Python children inherit
    ui = subprocess.Popen(
        [sys.executable, str(REPO / "scripts" / "ui.py"), "-p", str(port)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        ends = time.monotonic() + 300
        while True:  # the webserver answers once the code location loaded
            assert ui.poll() is None, "scripts/ui.py ended before the UI answered"
            assert time.monotonic() < ends, "the UI did not answer within 300 s"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                time.sleep(1)
        started = _descendants(ui.pid)
        assert len(started) >= 2  # dagster dev and what it started (webserver, daemon, code servers)

        ui.send_signal(signal.SIGTERM)
        assert ui.wait(timeout=90) == 128 + signal.SIGTERM
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in started) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [pid for pid in started if _alive(pid)]
    finally:
        if ui.poll() is None:
            ui.kill()
        for pid in _descendants(ui.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
