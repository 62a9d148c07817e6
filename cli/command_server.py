"""The serving process's side of ``cli/server_client.py``: a Unix socket beside the HTTP port on
which the command line's questions, adds and forgets run in this process, on its warm embedder,
index, event log and live memory, with the very command code the command line runs (same JSON,
same exit codes). The socket is the user's own, mode 0600, and a peer of another uid is refused.

A request is answered ``{"fallback": why}`` (the caller then runs the command itself) when the
caller's settings or folders are not this server's, when the project's code changed since the
server started, or when the chat's memory is stale: the caller's own run builds it, with progress.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import socketserver
import struct
import threading
import time
from argparse import Namespace
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cli.server_client import ARG_PATHS, PROTOCOL, NeedsLocalRun, settings_now, socket_path
from narrative_mirror.home import Home

log = logging.getLogger(__name__)
SERVED_COMMANDS = ("ask", "search", "arc", "trace", "add", "forget", "chats")


@dataclass
class Served:
    """What a served command uses instead of building its own: the server's warm objects."""

    retriever: Any
    llm: Any
    event_log: Any
    live: Any = None
    forgetting: Any = None


@dataclass
class ServerInfo:
    """What ``serve status`` says: who serves what, where, since when."""

    pid: int
    since: str
    url: str
    socket: str
    data: str
    arcs: str | None
    chats: list[str]
    not_served: dict[str, str] = field(default_factory=dict)


class CommandServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, home: Path, served: Served, info: ServerInfo, functions: dict[str, Any], execute: Any):
        """``functions``: the served commands' functions by name; ``execute``: how the command line
        runs a parsed command (both from ``cli.main.served_commands``, so this module imports neither
        the parser nor the main module that start it)."""
        from cli.stamp import code_digest

        self.home, self.served, self.info = home, served, info
        self.execute = execute
        self.settings = settings_now()
        self.folders = {"data": info.data, "arcs": info.arcs}
        self.code = code_digest()
        self.functions = functions
        self.path = socket_path(home, create=True)
        if self.path.exists() or self.path.is_symlink():
            self.path.unlink()  # the caller checked that no server answers on it
        old_mask = os.umask(0o177)  # the socket is born 0600: no moment in which others may connect
        try:
            super().__init__(str(self.path), _Handler)
        finally:
            os.umask(old_mask)
        os.chmod(self.path, 0o600)
        self.info.socket = str(self.path)
        self.answered: Counter[str] = Counter()  # commands answered here, by name
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self.serve_forever, name="nm-commands", daemon=True)
        self._thread.start()
        state = Home(self.home).running_server
        tmp = state.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(vars(self.info)), encoding="utf-8")
        os.chmod(tmp, 0o600)
        os.replace(tmp, state)

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        self.path.unlink(missing_ok=True)
        state = Home(self.home).running_server
        try:
            if json.loads(state.read_text(encoding="utf-8")).get("pid") == os.getpid():
                state.unlink()
        except (OSError, ValueError):
            pass

    def answer(self, request: dict) -> dict:
        """The answer to one request (``_handle`` writes it back)."""
        from cli.stamp import code_digest

        if request.get("protocol") != PROTOCOL:
            return {"fallback": "another protocol version"}
        command = request.get("command")
        if command == "status":
            return {"result": {**vars(self.info), "answered": dict(self.answered)}}
        if command not in self.functions:
            return {"fallback": f"{command!r} is not served"}
        if request.get("settings") != self.settings:
            return {"fallback": "the caller's environment differs from the server's"}
        if request.get("folders") != self.folders:
            return {"fallback": "the caller's data or ARC folder is not the server's"}
        if code_digest.__wrapped__() != self.code:
            return {"fallback": "the project's code changed since the server started"}
        args = Namespace(**request.get("args", {}))
        for key in ARG_PATHS:
            if getattr(args, key, None) is not None:
                setattr(args, key, Path(getattr(args, key)))
        lines: list[str] = []
        args.func, args.served, args.say = self.functions[command], self.served, lines.append
        try:
            result, _ = self.execute(args)
        except NeedsLocalRun as exc:
            return {"fallback": str(exc)}
        self.answered[command] += 1
        return {"result": result, "stderr": lines}


class _Handler(socketserver.StreamRequestHandler):
    server: CommandServer

    def handle(self) -> None:
        creds = self.request.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _, uid, _ = struct.unpack("3i", creds)
        if uid != os.getuid():  # the socket's mode keeps others out; this is the second lock
            log.warning("command socket: refused a peer of uid %s", uid)
            return
        started, request = time.monotonic(), None
        try:
            request = json.loads(self.rfile.readline())
            answer = self.server.answer(request if isinstance(request, dict) else {})
        except Exception as exc:  # noqa: BLE001 - the caller runs the command itself
            log.exception("command socket: request failed")
            answer = {"fallback": f"the server failed: {type(exc).__name__}"}
        self.wfile.write(json.dumps(answer, default=str).encode() + b"\n")
        log.info(
            "command socket: %s answered in %.3f s",
            request.get("command") if isinstance(request, dict) else "?",
            time.monotonic() - started,
        )


def server_info(url: str, data: Path, arcs: Path | None, chats: list[str], not_served: dict[str, str]) -> ServerInfo:
    return ServerInfo(
        pid=os.getpid(),
        since=datetime.now(UTC).isoformat(timespec="seconds"),
        url=url,
        socket="",
        data=str(data),
        arcs=str(arcs) if arcs else None,
        chats=chats,
        not_served=dict(not_served),
    )
