"""The command line's way to the home's running server (as ``docker`` talks to its daemon).

``serve`` listens on a Unix socket recorded under NM_HOME (``serve.sock``, or a short path under
/tmp named by ``serve.sock.path`` when NM_HOME is too long for AF_UNIX) and writes ``serve.json``
(pid, since when, what it serves). A question command sends its parsed arguments there and prints
the server's result as if it had run here: same JSON, same exit code. Without a server (no socket,
or a dead one's socket, which is removed) the command runs in its own process as before; a socket
that is not the user's own, mode 0600, is refused with a warning. Plain Python, light imports: this
runs before anything heavy is loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import sys
from pathlib import Path

from narrative_mirror.home import Home

MAX_SOCKET_PATH = 107  # AF_UNIX sun_path holds 108 bytes, the last one the terminating NUL
PROTOCOL = 1
ARG_PATHS = ("data", "arcs", "file", "tokens")  # arguments that are paths (sent absolute)


class NeedsLocalRun(Exception):
    """Raised in the server when a command must run in the caller's own process instead (its
    memory is stale and needs a build, whose progress belongs on the caller's terminal)."""


def socket_path(home: Path, create: bool = False) -> Path:
    """Where the home's server listens: ``<home>/serve.sock``, or when that path is longer than
    AF_UNIX allows, ``/tmp/nm-<uid>/<hash of home>.sock`` (its folder 0700) named by a pointer file."""
    direct = Home(home).command_socket
    if len(os.fsencode(direct)) <= MAX_SOCKET_PATH:
        return direct
    folder = Path("/tmp") / f"nm-{os.getuid()}"
    short = folder / f"{hashlib.sha256(os.fsencode(home.resolve())).hexdigest()[:16]}.sock"
    if create:
        folder.mkdir(mode=0o700, exist_ok=True)
        _check_own(folder, 0o077, "folder")
        pointer = Home(home).command_socket_pointer
        pointer.write_text(str(short), encoding="utf-8")
        os.chmod(pointer, 0o600)
    return short


def _check_own(path: Path, forbidden: int, what: str, st: os.stat_result | None = None) -> None:
    st = st or os.lstat(path)
    if st.st_uid != os.getuid():
        raise PermissionError(f"{what} {path} is owned by uid {st.st_uid}, not by this user ({os.getuid()})")
    if st.st_mode & forbidden:
        raise PermissionError(f"{what} {path} has mode {oct(stat.S_IMODE(st.st_mode))}: others may use it")


def check_socket(path: Path, st: os.stat_result | None = None) -> None:
    """PermissionError unless ``path`` is a socket of this user that nobody else may open (0600)."""
    st = st or os.lstat(path)
    if not stat.S_ISSOCK(st.st_mode):
        raise PermissionError(f"{path} is not a socket")
    _check_own(path, 0o077, "server socket", st)


def _served_socket(home: Path) -> Path | None:
    """The socket a server of ``home`` listens on, if its file is there."""
    pointer = Home(home).command_socket_pointer
    if pointer.exists():
        _check_own(pointer, 0o022, "socket pointer file")
        path = Path(pointer.read_text(encoding="utf-8").strip())
        _check_own(path.parent, 0o077, "socket folder")
    else:
        path = Home(home).command_socket
    return path if path.exists() or path.is_symlink() else None


def exchange(path: Path, request: dict, timeout: float | None = None) -> dict:
    """Send one request (a JSON line) and read the answer (a JSON line)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        conn.connect(str(path))
        conn.sendall(json.dumps(request).encode() + b"\n")
        with conn.makefile("rb") as reader:
            line = reader.readline()
    if not line:
        raise ConnectionError("the server closed the connection without an answer")
    return json.loads(line)


def call_server(home: Path, request: dict, timeout: float | None = None) -> dict | None:
    """The running server's answer to ``request``; None when no server runs for ``home`` (a dead
    one's socket is removed). A socket that is not safely the user's own raises PermissionError."""
    path = _served_socket(home)
    if path is None:
        return None
    check_socket(path)
    try:
        return exchange(path, {"protocol": PROTOCOL, **request}, timeout)
    except (ConnectionRefusedError, FileNotFoundError):  # a server that died without cleaning up
        path.unlink(missing_ok=True)
        Home(home).running_server.unlink(missing_ok=True)
        return None


def settings_now() -> dict[str, str | None]:
    """Every environment variable the project reads: a server answers only callers that agree."""
    from resources import environment

    names = sorted(
        value for name, value in vars(environment).items() if name.endswith("_ENV") and isinstance(value, str)
    )
    return {name: environment.value(name) for name in names}


def folders_of(args) -> dict[str, str | None]:
    """The data and ARC folders a command reads, resolved as the commands resolve them."""
    from resources import environment

    data = args.data.resolve() if getattr(args, "data", None) else environment.data_dir()
    arcs = getattr(args, "arcs", None)
    return {"data": str(data), "arcs": str(arcs.resolve()) if arcs else None}


def wire_args(args) -> dict:
    """The parsed arguments as JSON: paths absolute, the command function left out."""
    out = {}
    for key, value in vars(args).items():
        if key in ("func", "served", "say", "argv", "served_commands"):
            continue
        if key in ARG_PATHS and value is not None:
            value = str(Path(value).resolve())
        out[key] = value
    return out


def through_server(args, **extra) -> dict | None:
    """The command's result from the home's running server, or None to run it here (no server,
    another configuration than the server's, ``--verbose``, or memory that needs a build first).
    ``extra``: what the caller already read (``add``'s messages). Lines the command printed
    on the server's side (``trace``'s steps) are printed here, on stderr."""
    if getattr(args, "served", None) is not None or getattr(args, "verbose", False):
        return None
    from resources import environment

    home = environment.nm_home()
    request = {
        "command": args.command,
        "args": wire_args(args) | extra,
        "settings": settings_now(),
        "folders": folders_of(args),
    }
    try:
        answer = call_server(home, request)
    except PermissionError as exc:
        print(
            f"narrative-mirror {args.command}: warning: refusing the server's socket ({exc}); "
            "answering in this process",
            file=sys.stderr,
        )
        return None
    except (OSError, ValueError) as exc:  # the server went away mid-answer
        if args.command in ("add", "forget"):
            raise RuntimeError(
                f"the home's server failed before answering ({exc}); "
                "check with `narrative-mirror chats` before repeating"
            ) from None
        return None
    if answer is None or "fallback" in answer:
        return None
    for line in answer.get("stderr", []):
        print(line, file=sys.stderr, flush=True)
    return answer["result"]
