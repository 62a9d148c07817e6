"""A flood of asks or searches from one token beside another token's searches and health checks,
run in its own process (so the clients never share the server's interpreter lock):
``python flood.py PORT FLOOD_TOKEN PROBE_TOKEN CHAT COUNT EVERY_S [ask|search]``. Prints one JSON
object: the probe's search and health seconds idle and during the flood, and per flooding request
its status, seconds and ``Retry-After``."""

from __future__ import annotations

import http.client
import json
import selectors
import socket
import sys
import threading
import time
from urllib.parse import urlencode


def probe_search(
    connection: http.client.HTTPConnection, token: str, chat: str, path: str = "/api/memory/search"
) -> float:
    started = time.monotonic()
    query = "?" + urlencode({"q": "rye bread at the bakery", "chat": chat, "k": 3}) if path.endswith("search") else ""
    connection.request("GET", path + query, headers={"Authorization": f"Bearer {token}", "Host": "127.0.0.1"})
    response = connection.getresponse()
    response.read()
    assert response.status == 200, response.status
    return time.monotonic() - started


def request_bytes(kind: str, token: str, chat: str, n: int) -> bytes:
    """The ``n``-th flooding request: an ask (profile deep) or a search, each with its own text."""
    auth = b"Authorization: Bearer " + token.encode() + b"\r\nConnection: close\r\n"
    if kind == "search":
        query = urlencode({"q": f"bread and marathon training {n}", "chat": chat, "k": 5})
        return b"GET /api/memory/search?" + query.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth + b"\r\n"
    body = json.dumps({"chat": chat, "question": f"Where does Ana work? ({n})", "profile": "deep"}).encode()
    return (
        b"POST /api/ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + auth
        + b"Content-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


def flood(port: int, token: str, chat: str, asks: int, every_s: float, kind: str = "ask") -> list[dict]:
    """``asks`` requests of ``kind``, one every ``every_s`` seconds, each on its own connection and
    read to its end (the server closes) while the next ones are sent."""
    selector = selectors.DefaultSelector()
    pending: dict[socket.socket, tuple[float, bytearray]] = {}
    results: list[dict] = []
    sent, next_send = 0, time.monotonic()
    while sent < asks or pending:
        if sent < asks and time.monotonic() >= next_send:
            raw = socket.create_connection(("127.0.0.1", port))
            raw.sendall(request_bytes(kind, token, chat, sent))
            raw.setblocking(False)
            pending[raw] = (time.monotonic(), bytearray())
            selector.register(raw, selectors.EVENT_READ)
            sent, next_send = sent + 1, next_send + every_s
        timeout = max(0.0, next_send - time.monotonic()) if sent < asks else 60
        for key, _ in selector.select(timeout=timeout):
            raw = key.fileobj
            started, received = pending[raw]
            chunk = raw.recv(65536)
            if chunk:
                received += chunk
                continue
            selector.unregister(raw)
            raw.close()
            del pending[raw]
            head = bytes(received).split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
            headers = dict(line.lower().split(": ", 1) for line in head[1:])
            results.append(
                {
                    "status": int(head[0].split()[1]),
                    "seconds": time.monotonic() - started,
                    "retry_after": headers.get("retry-after"),
                }
            )
    return results


def main(
    port: int, flood_token: str, probe_token: str, chat: str, count: int, every_s: float, kind: str = "ask"
) -> dict:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    health = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    idle = [probe_search(connection, probe_token, chat) for _ in range(40)]
    health_idle = [probe_search(health, probe_token, chat, "/api/health") for _ in range(20)]
    during: list[float] = []
    health_during: list[float] = []
    done = threading.Event()

    def probe(into: list[float], client: http.client.HTTPConnection, path: str, pause_s: float) -> None:
        while not done.is_set():
            into.append(probe_search(client, probe_token, chat, path))
            time.sleep(pause_s)

    threads = [
        threading.Thread(target=probe, args=(during, connection, "/api/memory/search", 0.0)),
        threading.Thread(target=probe, args=(health_during, health, "/api/health", 0.05)),
    ]
    for thread in threads:
        thread.start()
    try:
        results = flood(port, flood_token, chat, count, every_s, kind)
    finally:
        done.set()
        for thread in threads:
            thread.join()
    return {"idle": idle, "during": during, "health_idle": health_idle, "health_during": health_during, "asks": results}


if __name__ == "__main__":
    port, flood_token, probe_token, chat, count, every_s, *kind = sys.argv[1:]
    print(json.dumps(main(int(port), flood_token, probe_token, chat, int(count), float(every_s), *kind)))
