"""The command line through the home's running server (cli/server_client.py, cli/command_server.py):
same JSON and exit codes as a run in the caller's process, a socket only the user may open, and the
caller's own run when there is no server (a dead one's socket removed) or the socket is not safe."""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path

import pytest
from loopback import free_port

from cli.command_server import CommandServer, Served, server_info
from cli.main import main, served_commands
from cli.server_client import call_server, check_socket, socket_path
from narrative_mirror.home import Home
from resources import environment, runtime

LINES = [
    {
        "id": "a1",
        "author": "Ines",
        "text": "The Lisbon half marathon starts at the Vasco da Gama bridge.",
        "timestamp": "2025-03-01T08:00:00Z",
    },
    {"author": "Kofi", "text": "Then we take the early ferry from Barreiro.", "timestamp": "2025-03-01T08:01:00Z"},
]


def _start(served: Served) -> CommandServer:
    server = CommandServer(
        environment.nm_home(),
        served,
        server_info("http://127.0.0.1:0", environment.data_dir(), None, [], {}),
        *served_commands(),
    )
    server.start()
    return server


@pytest.fixture
def command_server():
    """A command socket of this process on the test's home (``chats`` needs no warm objects)."""
    server = _start(Served(retriever=None, llm=None, event_log=None))
    yield server
    server.close()


@pytest.fixture
def warm_command_server(embedder):
    """A command socket of this process on the test's home, serving the real embedder and index."""
    from narrative_mirror.live.forget import Forgetting
    from narrative_mirror.live.log import LiveLog

    home = environment.nm_home()
    store = runtime.index_from_environment()
    retriever = runtime.retriever(store, embedder)
    event_log = runtime.event_log(retriever)
    live = runtime.live_memory(retriever)
    server = _start(Served(retriever, None, event_log, live, Forgetting(LiveLog(home / "live"), store, home)))
    yield server
    server.close()
    event_log.close()


def _run(capsys, argv) -> tuple[int, dict, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def test_chats_goes_through_the_server_with_the_json_of_a_local_run(capsys, command_server):
    home = environment.nm_home()
    sock = home / "serve.sock"
    assert stat.S_IMODE(os.lstat(sock).st_mode) == 0o600
    assert json.loads(Home(home).running_server.read_text())["pid"] == os.getpid()
    served = _run(capsys, ["chats", "--json"])
    bad = _run(capsys, ["chats", "--data", str(home / "missing"), "--json"])
    assert command_server.answered["chats"] == 1  # another data folder than the server's: run here
    command_server.close()
    assert not sock.exists() and not Home(home).running_server.exists()
    assert _run(capsys, ["chats", "--json"]) == served
    assert bad[0] == 2 and _run(capsys, ["chats", "--data", str(home / "missing"), "--json"]) == bad


@pytest.mark.slow  # a live add and a forget, each through the server and here: ~45 s on a busy 2-core machine
def test_add_and_forget_go_through_the_server(tmp_path, capsys, warm_command_server, embedder, monkeypatch):
    command_server = warm_command_server
    monkeypatch.setattr(runtime, "embedder", lambda *args: embedder)  # the local runs: the same loaded model
    home = environment.nm_home()
    sock = home / "serve.sock"
    assert stat.S_IMODE(os.lstat(sock).st_mode) == 0o600
    assert json.loads(Home(home).running_server.read_text())["pid"] == os.getpid()

    assert _run(capsys, ["chats", "--json"])[0] == 0
    assert command_server.answered["chats"] == 1
    source = tmp_path / "batch.jsonl"
    source.write_text("\n".join(json.dumps(line) for line in LINES) + "\n")
    code, added, _ = _run(capsys, ["add", "--chat", "run_Ines_Kofi", "--file", str(source), "--json"])
    assert (code, added["added"], added["ids"], command_server.answered["add"]) == (0, 2, ["a1", "L1"], 1)
    # the server's own live memory holds them: a search of the served retriever finds the ferry
    hits = command_server.served.retriever.search("run_Ines_Kofi", "ferry Barreiro", k=3).hits
    assert hits[0].local_id == "L1"
    bad = _run(capsys, ["forget", "--chat", "run_Ines_Kofi", "--id", "nope", "--json"])
    gone = _run(capsys, ["forget", "--chat", "run_Ines_Kofi", "--id", "L1", "--json"])
    assert command_server.answered["forget"] == 2
    assert gone[0] == 0 and gone[1]["removed"]["live_log"] == {"messages": 1}
    served = _run(capsys, ["chats", "--json"])

    command_server.close()  # no server now: the same commands run here and answer the same
    assert not sock.exists() and not Home(home).running_server.exists()
    local = _run(capsys, ["chats", "--json"])
    assert served == local
    assert _run(capsys, ["forget", "--chat", "run_Ines_Kofi", "--id", "nope", "--json"]) == bad
    assert bad[0] == 2 and "no message with that id" in bad[2]


def test_a_socket_others_may_open_is_refused_and_the_command_runs_here(capsys, command_server):
    sock = environment.nm_home() / "serve.sock"
    os.chmod(sock, 0o666)
    code, out, err = _run(capsys, ["chats", "--json"])
    assert code == 0 and [c["chat"] for c in out["chats"]][0] == "demo_garden_Mara_Theo"
    assert "refusing the server's socket" in err and "mode 0o666" in err
    assert command_server.answered["chats"] == 0


def test_a_socket_of_another_user_is_refused(tmp_path):
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        os.chmod(path, 0o600)
        check_socket(path)  # the user's own, 0600: accepted
        st = os.lstat(path)
        foreign = os.stat_result(
            (
                st.st_mode,
                st.st_ino,
                st.st_dev,
                st.st_nlink,
                os.getuid() + 1,
                st.st_gid,
                st.st_size,
                st.st_atime,
                st.st_mtime,
                st.st_ctime,
            )
        )
        with pytest.raises(PermissionError, match="owned by uid"):
            check_socket(path, foreign)
    plain = tmp_path / "plain"
    plain.write_text("")
    with pytest.raises(PermissionError, match="not a socket"):
        check_socket(plain)


def test_a_dead_servers_socket_is_removed_and_the_command_runs_here(capsys):
    home = environment.nm_home()
    path = home / "serve.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))  # a server that died: its socket file stays, nobody listens
    listener.close()
    os.chmod(path, 0o600)
    Home(home).running_server.write_text("{}")
    code, out, _ = _run(capsys, ["chats", "--json"])
    assert code == 0 and len(out["chats"]) == 3
    assert not path.exists() and not Home(home).running_server.exists()


def test_a_long_home_gets_a_short_socket_named_by_a_pointer(tmp_path, monkeypatch):
    home = tmp_path / ("h" * 60) / ("o" * 60)
    home.mkdir(parents=True)
    path = socket_path(home, create=True)
    assert len(os.fsencode(path)) <= 107 and path.parent.stat().st_mode & 0o077 == 0
    assert Path((home / "serve.sock.path").read_text()) == path
    assert call_server(home, {"command": "status"}) is None  # named but not there: no server


def _cli(env: dict, *argv: str) -> tuple[int, dict, str]:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "cli.main", *argv, "--json"], env=env, capture_output=True, text=True, timeout=900
    )
    return done.returncode, json.loads(done.stdout), done.stderr


def _comparable(answer: dict) -> dict:
    return {k: v for k, v in answer.items() if k not in ("event_id", "timings_ms")}


@pytest.mark.slow  # builds the demo chats in a real `serve` process, then again after an edit: minutes when busy
@pytest.mark.timeout(1800)
def test_a_real_server_answers_the_cli_as_a_local_run_does(tmp_path):
    import shutil

    from narrative_mirror import settings

    data = tmp_path / "data"
    shutil.copytree(settings.DEMO_DATA_DIR, data)
    port = free_port()
    env = {**os.environ, "NM_DATA_DIR": str(data), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    question = ["ask", "--chat", "demo_marathon_Ines_Kofi", "where does the race start?"]
    code, started, _ = _cli(env, "serve", "--background", "--port", str(port))
    assert code == 0 and started["running"] and len(started["chats"]) == 3
    try:
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=30) as health:
            assert health.status == 200  # returned only once the HTTP port answers too
        served = _cli(env, *question)
        bad_served = _cli(env, "ask", "--chat", "nope", "x")
        status = _cli(env, "serve", "status")[1]
        assert status["answered"] == {"ask": 1} and status["pid"] == started["pid"]
        # an edited chat: the server knows its memory is stale; the caller's run rebuilds it and says so
        chat = data / "demo_marathon_Ines_Kofi.json"
        with open(chat, "a", encoding="utf-8") as handle:
            handle.write("\n")
        code, _, err = _cli(env, *question)
        assert (
            code == 0 and "demo_marathon_Ines_Kofi" in err and _cli(env, "serve", "status")[1]["answered"] == {"ask": 1}
        )
    finally:
        stopped = _cli(env, "serve", "stop")
    assert stopped[0] == 0 and stopped[1]["stopped"] == started["pid"]
    assert _cli(env, "serve", "status")[0] == 1
    local = _cli(env, *question)
    assert served[0] == local[0] == 0 and _comparable(served[1]) == _comparable(local[1])
    assert bad_served == _cli(env, "ask", "--chat", "nope", "x") and bad_served[0] == 2
