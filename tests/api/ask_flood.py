"""A flood of asks from one token beside another token's searches, run in its own process (so the
clients never share the server's interpreter lock): ``python ask_flood.py PORT FLOOD_TOKEN
PROBE_TOKEN CHAT ASKS``. Prints one JSON object: the probe's search seconds idle and during the
flood, and per ask its status, seconds and ``Retry-After``."""

from __future__ import annotations

import http.client
import json
import selectors
import socket
import sys
import threading
import time
from urllib.parse import urlencode


def probe_search(connection: http.client.HTTPConnection, token: str, chat: str) -> float:
    started = time.monotonic()
    connection.request("GET", "/api/memory/search?" + urlencode({"q": "rye bread at the bakery", "chat": chat, "k": 3}),
                       headers={"Authorization": f"Bearer {token}", "Host": "127.0.0.1"})
    response = connection.getresponse()
    response.read()
    assert response.status == 200, response.status
    return time.monotonic() - started


def flood(port: int, token: str, chat: str, asks: int, every_s: float) -> list[dict]:
    """``asks`` asks, one every ``every_s`` seconds, each on its own connection and read to its end
    (the server closes) while the next ones are sent."""
    selector = selectors.DefaultSelector()
    pending: dict[socket.socket, tuple[float, bytearray]] = {}
    results: list[dict] = []
    sent, next_send = 0, time.monotonic()
    while sent < asks or pending:
        if sent < asks and time.monotonic() >= next_send:
            body = json.dumps({"chat": chat, "question": f"Where does Ana work? ({sent})", "profile": "deep"}).encode()
            raw = socket.create_connection(("127.0.0.1", port))
            raw.sendall(b"POST /api/ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        b"Authorization: Bearer " + token.encode() + b"\r\nConnection: close\r\n"
                        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
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
            results.append({"status": int(head[0].split()[1]), "seconds": time.monotonic() - started,
                            "retry_after": headers.get("retry-after")})
    return results


def main(port: int, flood_token: str, probe_token: str, chat: str, asks: int, every_s: float) -> dict:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    idle = [probe_search(connection, probe_token, chat) for _ in range(40)]
    during: list[float] = []
    done = threading.Event()

    def probe() -> None:
        while not done.is_set():
            during.append(probe_search(connection, probe_token, chat))

    thread = threading.Thread(target=probe)
    thread.start()
    try:
        results = flood(port, flood_token, chat, asks, every_s)
    finally:
        done.set()
        thread.join()
    return {"idle": idle, "during": during, "asks": results}


if __name__ == "__main__":
    port, flood_token, probe_token, chat, asks, every_s = sys.argv[1:]
    print(json.dumps(main(int(port), flood_token, probe_token, chat, int(asks), float(every_s))))
