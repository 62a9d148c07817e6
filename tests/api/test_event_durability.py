"""kill -9 of a real ``serve`` process with retrieval events in flight loses no acknowledged event:
every event id a response carried is in the ``retrieval_events`` table exactly once after the next
start (the spool under NM_HOME is stored by the next ``EventLog``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import httpx
import pytest
from chat_factory import small_chat, write_chat
from loopback import free_port

from cli.main import main
from narrative_mirror.events.table import read_events
from resources import runtime

ROOT = Path(__file__).resolve().parents[2]
CHAT = "tiny"
QUERIES = ("bakery job", "rye bread", "new job tomorrow", "which bakery", "good luck")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_kill_9_of_serve_loses_no_acknowledged_event(tmp_path, capsys):
    data = tmp_path / "data"
    write_chat(data, CHAT, small_chat())
    assert main(["build", "--data", str(data), "--json"]) == 0
    capsys.readouterr()
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", "from cli.main import run; run()", "serve", "--data", str(data), "--port", str(port)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    acknowledged: list[str] = []
    try:
        with httpx.Client(base_url=base, timeout=30) as client:
            deadline = time.monotonic() + 240
            while True:
                assert server.poll() is None, server.stderr.read().decode()[-2000:]
                assert time.monotonic() < deadline, "serve did not start"
                try:
                    if client.get("/api/health").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.2)

            def search(i: int) -> str:
                response = client.get("/api/memory/search", params={"q": QUERIES[i % 5], "chat": CHAT, "k": 2})
                assert response.status_code == 200
                return response.json()["meta"]["event_id"]

            def ask(i: int) -> str:
                response = client.post(
                    "/api/ask", json={"chat": CHAT, "question": "Where does Ana work?", "profile": "fast"}
                )
                assert response.status_code == 200
                return response.headers["X-Retrieval-Event-Id"]

            with ThreadPoolExecutor(max_workers=8) as pool:
                futures = [pool.submit(ask if i % 10 == 0 else search, i) for i in range(200)]
                for future in as_completed(futures):
                    try:
                        acknowledged.append(future.result())
                    except (httpx.TransportError, AssertionError):
                        pass  # cut off by the kill: never acknowledged
                    if len(acknowledged) == 60:
                        os.kill(server.pid, signal.SIGKILL)  # requests still in flight
    finally:
        if server.poll() is None:
            os.kill(server.pid, signal.SIGKILL)
        server.wait(30)
    assert server.returncode == -9
    assert len(acknowledged) >= 60 and len(set(acknowledged)) == len(acknowledged)

    index = runtime.index_from_environment()
    before = set(read_events(index.uri)["event_id"].to_list())  # what the killed writer had stored
    event_log = runtime.event_log(runtime.retriever(index, runtime.embedder()))  # the next start
    stored = event_log.events()["event_id"].to_list()
    event_log.close()
    assert len(stored) == len(set(stored))  # exactly once
    assert set(acknowledged) <= set(stored)
    spool = Path(os.environ["NM_HOME"]) / "events" / "spool"
    assert list(spool.glob("*.jsonl")) == []
    print(
        json.dumps(
            {
                "acknowledged": len(acknowledged),
                "stored_before_restart": len(before & set(acknowledged)),
                "stored_after": len(stored),
            }
        )
    )
