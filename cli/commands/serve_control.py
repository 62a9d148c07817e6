"""``serve --background``, ``serve stop`` and ``serve status``: the home's server as a one-liner.

The server records itself in ``<NM_HOME>/serve.json`` (pid, since when, url, socket, what it
serves) and answers ``status`` on its command socket (``cli/command_server.py``); ``stop`` sends
it SIGTERM and waits until the process is gone.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from narrative_mirror.home import Home

STOP_WAIT_S = 30.0
START_WAIT_S = 3600.0  # the first start builds every chat's memory
LOG_NAME = "serve.log"


def running_server(home: Path) -> dict | None:
    """What the home's running server says of itself (``serve status``), or None without one."""
    from cli.server_client import call_server

    answer = call_server(home, {"command": "status"}, timeout=10.0)
    return answer.get("result") if answer else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def refuse_second_server(home: Path) -> None:
    """A home has one server: a second would take its socket."""
    if (info := running_server(home)) is not None:
        raise ValueError(
            f"a server (pid {info['pid']}, since {info['since']}) already serves {home}: "
            "`narrative-mirror serve stop` stops it"
        )


def status(home: Path) -> dict:
    info = running_server(home)
    if info is None:
        return {"running": False, "home": str(home), "failures": [f"no server is running for {home}"]}
    return {"running": True, "home": str(home), **info}


def stop(home: Path) -> dict:
    info = running_server(home)
    if info is None:
        return {"running": False, "stopped": None, "home": str(home)}
    pid = int(info["pid"])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pid):
        return {
            "running": True,
            "stopped": pid,
            "home": str(home),
            "failures": [f"server pid {pid} did not stop within {STOP_WAIT_S:g} s of SIGTERM"],
        }
    return {"running": False, "stopped": pid, "home": str(home), "since": info["since"]}


def _accepts(url: str) -> bool:
    """True when the HTTP port of ``url`` takes a connection (the command socket answers first)."""
    parts = urlsplit(url)
    if not parts.port:
        return True
    try:
        socket.create_connection((parts.hostname or "127.0.0.1", parts.port), timeout=1.0).close()
    except OSError:
        return False
    return True


def start_background(home: Path, argv: list[str]) -> dict:
    """Start ``serve`` (``argv`` without ``--background``) detached from this terminal, its output
    in ``<NM_HOME>/logs/serve.log``; returns once it answers on its socket and its HTTP port."""
    refuse_second_server(home)
    logs = Home(home).logs
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / LOG_NAME
    with open(log_path, "ab") as log_file:
        os.chmod(log_path, 0o600)
        child = subprocess.Popen(
            [sys.executable, "-m", "cli.main", *[a for a in argv if a != "--background"]],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=log_file,
            start_new_session=True,
            cwd=os.getcwd(),
        )
    deadline = time.monotonic() + START_WAIT_S
    while time.monotonic() < deadline:
        if child.poll() is not None:
            tail = log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:]
            raise RuntimeError(
                f"the server exited with code {child.returncode} before serving: {' | '.join(tail)} (log: {log_path})"
            )
        info = running_server(home)
        if info is not None and info.get("pid") == child.pid and _accepts(info.get("url", "")):
            return {"running": True, "home": str(home), "log": str(log_path), **info}
        time.sleep(0.2)
    raise RuntimeError(f"the server (pid {child.pid}) did not answer within {START_WAIT_S:g} s (log: {log_path})")


def control(args) -> dict | None:
    """``serve stop`` / ``serve status`` / ``serve --background``: their result; None for a plain
    ``serve`` (which serves HTTP beside another server of the home; the first keeps the command line)."""
    from resources import environment

    home = environment.nm_home()
    if args.action == "stop":
        return stop(home)
    if args.action == "status":
        return status(home)
    if args.background:
        return start_background(home, args.argv)
    return None
