"""Two real ``serve`` processes on one NM_HOME: a batch added through one (HTTP) is found by a
search through the other as soon as the add has returned (the other reads just the new rows:
``LiveMemory.refresh`` and the append journal)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from loopback import free_port

ROOT = Path(__file__).resolve().parents[2]
CHAT = "walk_Ada_Bo"


def start_serve(data: Path, port: int, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", "from cli.main import run; run()", "serve", "--data", str(data), "--port", str(port)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=open(log, "wb"),
    )


def wait_healthy(client: httpx.Client, server: subprocess.Popen, log: Path, deadline: float) -> None:
    while True:
        assert server.poll() is None, log.read_text()[-2000:]
        assert time.monotonic() < deadline, "serve did not start: " + log.read_text()[-2000:]
        try:
            if client.get("/api/health").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)


def bm25_ids(client: httpx.Client, q: str) -> tuple[int, list[str]]:
    response = client.get("/api/memory/search", params={"chat": CHAT, "q": q, "k": 2, "variant": "bm25"})
    return response.status_code, [
        hit["id"] for hit in response.json().get("hits", [])
    ] if response.status_code == 200 else []


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_an_add_through_one_serve_is_found_through_another(tmp_path):
    from chat_factory import small_chat, write_chat

    data = tmp_path / "data"
    write_chat(data, "tiny", small_chat())
    ports = free_port(), free_port()
    servers = [start_serve(data, ports[0], tmp_path / "a.log")]
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{ports[0]}", timeout=60) as a:
            wait_healthy(a, servers[0], tmp_path / "a.log", time.monotonic() + 400)  # A built the home
            servers.append(start_serve(data, ports[1], tmp_path / "b.log"))
            with httpx.Client(base_url=f"http://127.0.0.1:{ports[1]}", timeout=60) as b:
                wait_healthy(b, servers[1], tmp_path / "b.log", time.monotonic() + 400)
                first = a.post(
                    f"/api/chats/{CHAT}/messages",
                    json={
                        "messages": [
                            {
                                "id": "w1",
                                "author": "Ada",
                                "text": "The zygodactyl woodpecker nests by the weir.",
                                "timestamp": "2025-04-01T09:00:00Z",
                            }
                        ]
                    },
                )
                assert first.status_code == 200 and first.json()["stored"] == ["w1"], first.text
                deadline = time.monotonic() + 15  # B lists a new chat when it reads the store's chats again (<= 5 s)
                while bm25_ids(b, "zygodactyl") != (200, ["w1"]):
                    assert time.monotonic() < deadline, bm25_ids(b, "zygodactyl")
                    time.sleep(0.2)
                # B holds the chat now: a later add through A is found through B at once
                second = a.post(
                    f"/api/chats/{CHAT}/messages",
                    json={
                        "messages": [
                            {
                                "author": "Bo",
                                "text": "A kingfisher fished below the millrace.",
                                "timestamp": "2025-04-01T09:05:00Z",
                            }
                        ]
                    },
                )
                assert second.json()["stored"] == ["L1"]
                assert bm25_ids(b, "kingfisher millrace") == (200, ["L1"])
                assert bm25_ids(a, "kingfisher millrace") == (200, ["L1"])
    finally:
        for server in servers:
            if server.poll() is None:
                server.send_signal(signal.SIGTERM)
            server.wait(60)
