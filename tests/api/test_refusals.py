"""What the API refuses before any work: foreign Hosts of an open API (DNS rebinding), bodies that
are not JSON, CORS; the security headers on every response; a token file that fails closed; a
client that hangs up mid-body (one log line, no traceback)."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvicorn
from loopback import free_port
from memory_api_chat import CHAT
from starlette.testclient import TestClient

from api.access import add_token, load_tokens
from api.app import create_app
from api.guard import API_CSP, PAGE_CSP, security_headers
from cli.main import main
from narrative_mirror.events.writer import EventLog

SEARCH = "/api/memory/search"
ASK = "/api/ask"
LOCAL = "http://localhost"
LOOPBACK_HOSTS = (
    "localhost",
    "localhost:8000",
    "LocalHost:1",
    "127.0.0.1",
    "127.0.0.1:8000",
    "127.9.8.7",
    "[::1]",
    "[::1]:8000",
)
FOREIGN_HOSTS = (
    "evil.attacker.example",
    "evil.attacker.example:8000",
    "127.0.0.1.nip.io",
    "localhost.evil.example",
    "192.168.1.20:8000",
    "0.0.0.0:8000",
    "[::2]:8000",
    "localhost:80@evil.example",
    "testserver",
)
SECURITY = {name.lower(): value for name, value in security_headers().items()}


@contextmanager
def app_client(retriever, folder: Path, base_url: str = LOCAL, **kwargs):
    """An app with its own event log (real LanceDB under ``folder``); yields (client, event_log, app)."""
    event_log = EventLog(folder / "events")
    app = create_app(retriever, event_log, runs_root=folder / "runs", **kwargs)
    with TestClient(app, base_url=base_url, raise_server_exceptions=False) as client:
        yield client, event_log, app


def assert_refused_without_chat(response, status: int) -> None:
    assert response.status_code == status, response.text
    assert set(response.json()) == {"error"} and response.json()["error"]["field"] is None
    assert response.json()["error"]["message"] and CHAT not in response.text


def assert_guarded(response) -> None:
    """The security headers, each once, and no CORS permission."""
    for name, value in SECURITY.items():
        assert response.headers.get_list(name) == [value], (response.status_code, name)
    assert not [name for name in response.headers if name.lower().startswith("access-control-")]


# -- DNS rebinding: the Host of an open API ----------------------------------------------------------
def test_an_open_api_refuses_a_foreign_host_and_answers_loopback_ones(retriever, tmp_path):
    ask = {"chat": CHAT, "question": "Where does Ana work?", "profile": "fast"}
    with app_client(retriever, tmp_path) as (client, event_log, _):
        for host in FOREIGN_HOSTS:
            headers = {"Host": host}
            for response in (
                client.get(SEARCH, params={"q": "rye", "chat": CHAT}, headers=headers),
                client.post(ASK, json=ask, headers=headers),
                client.get("/api/health", headers=headers),
                client.get("/api/nothing", headers=headers),
                client.options(
                    ASK, headers={**headers, "Origin": f"http://{host}", "Access-Control-Request-Method": "POST"}
                ),
            ):
                assert_refused_without_chat(response, 403)
                assert "localhost" in response.json()["error"]["message"]
                assert_guarded(response)
        for host in LOOPBACK_HOSTS:
            response = client.get(SEARCH, params={"q": "rye", "chat": CHAT, "k": 1}, headers={"Host": host})
            assert response.status_code == 200, host
            assert len(response.json()["hits"]) == 1
        assert client.post(ASK, json=ask, headers={"Host": "127.0.0.1:8000"}).status_code == 200
        event_log.flush()
        assert event_log.events().height == len(LOOPBACK_HOSTS) + 1  # the refused requests logged nothing


def test_with_tokens_any_host_is_served_to_a_token(retriever, tmp_path):
    path = tmp_path / "tokens.json"
    token = add_token(path, "ana", ["*"])
    with app_client(retriever, tmp_path, base_url="http://evil.attacker.example", tokens=load_tokens(path)) as (
        client,
        _,
        _,
    ):
        params = {"q": "rye", "chat": CHAT, "k": 1}
        assert client.get(SEARCH, params=params, headers={"Authorization": f"Bearer {token}"}).status_code == 200
        assert (
            client.get(
                "/api/health", headers={"Authorization": f"Bearer {token}", "Host": "192.168.1.20:8000"}
            ).status_code
            == 200
        )
        refused = client.get(SEARCH, params=params)  # the token, not the Host, protects
        assert refused.status_code == 401 and CHAT not in refused.text


# -- bodies: JSON only ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/json-seq",
        "application/jsonp",
        "text/json",
    ],
)
def test_a_post_that_is_not_json_is_415(retriever, tmp_path, content_type):
    body = json.dumps({"chat": CHAT, "question": "Where does Ana work?", "profile": "fast"})
    with app_client(retriever, tmp_path) as (client, event_log, _):
        headers = {"Content-Type": content_type} if content_type else {}
        response = client.post(ASK, content=body, headers=headers)
        if content_type is None:
            assert "content-type" not in response.request.headers
        assert_refused_without_chat(response, 415)
        assert "application/json" in response.json()["error"]["message"]
        assert_guarded(response)
        for accepted in ("application/json", "Application/JSON; charset=utf-8"):
            assert client.post(ASK, content=body, headers={"Content-Type": accepted}).status_code == 200
        event_log.flush()
        assert event_log.events().height == 2  # the refused ask did no work


# -- no CORS, security headers everywhere -------------------------------------------------------------
def test_every_response_carries_the_security_headers_and_no_cors(retriever, tmp_path):
    path = tmp_path / "tokens.json"
    token = add_token(path, "ana", [CHAT])
    origin = {"Origin": "http://localhost"}  # the page's own origin: a foreign one is refused (test_cross_site)
    with app_client(retriever, tmp_path) as (client, _, app):

        @app.get("/api/boom")
        async def boom():  # a bug: Starlette's outermost error layer answers it
            raise RuntimeError("a bug")

        @app.get("/page")
        async def page():  # a web page widens the content policy with the one constant
            from fastapi.responses import HTMLResponse

            return HTMLResponse(
                "<p>hi</p>", headers={"Content-Security-Policy": PAGE_CSP, "Access-Control-Allow-Origin": "*"}
            )

        responses = {
            200: client.get(SEARCH, params={"q": "rye", "chat": CHAT}, headers=origin),
            400: client.get(SEARCH, params={"q": "rye"}, headers=origin),
            404: client.get("/api/nothing", headers=origin),
            405: client.options(
                ASK,
                headers={
                    **origin,
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "content-type",
                },
            ),
            403: client.get(SEARCH, params={"q": "rye", "chat": CHAT}, headers={"Origin": "http://evil.example"}),
            413: client.post(ASK, content=b" " * 20_000, headers={"Content-Type": "application/json"}),
            500: client.get("/api/boom"),
        }
        for status, response in responses.items():
            assert response.status_code == status
            assert_guarded(response)
            assert response.headers["content-security-policy"] == API_CSP
        widened = client.get("/page")
        assert widened.status_code == 200 and widened.headers["content-security-policy"] == PAGE_CSP
        beside_csp = {k: v for k, v in SECURITY.items() if k != "content-security-policy"}
        assert all(widened.headers[k] == v for k, v in beside_csp.items())
        assert "access-control-allow-origin" not in widened.headers
    with app_client(retriever, tmp_path, tokens=load_tokens(path)) as (client, _, _):
        unauthorized = client.get("/api/health", headers=origin)
        assert unauthorized.status_code == 401
        assert_guarded(unauthorized)
        forbidden = client.get(
            SEARCH, params={"q": "rye", "chat": "other_chat"}, headers={**origin, "Authorization": f"Bearer {token}"}
        )
        assert forbidden.status_code == 403
        assert_guarded(forbidden)


# -- the token file fails closed ---------------------------------------------------------------------
def test_serve_with_a_missing_or_invalid_token_file_exits_2_naming_it(tmp_path, capsys):
    missing = tmp_path / "missing.json"
    invalid = tmp_path / "invalid.json"
    invalid.write_text('{"version": 1, "tokens": [{"name": "ana"}]}')
    folder = tmp_path / "folder.json"
    folder.mkdir()
    for path in (missing, invalid, folder):
        assert main(["serve", "--data", str(tmp_path / "no_data"), "--tokens", str(path)]) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and str(path) in err and "Traceback" not in err
        assert err.startswith("narrative-mirror serve: ")


def test_a_token_file_deleted_while_serving_refuses_until_it_is_back(retriever, tmp_path):
    path = tmp_path / "tokens.json"
    token = add_token(path, "ana", [CHAT])
    good = path.read_text()
    auth = {"Authorization": f"Bearer {token}"}
    params = {"q": "rye", "chat": CHAT, "k": 1}
    with app_client(retriever, tmp_path, tokens=load_tokens(path)) as (client, _, _):
        assert client.get(SEARCH, params=params, headers=auth).status_code == 200
        for breaks in (path.unlink, lambda: path.write_text("{not json")):
            breaks()
            for response in (
                client.get(SEARCH, params=params, headers=auth),
                client.get("/api/health", headers=auth),
                client.post(ASK, json={"chat": CHAT, "question": "Where?"}, headers=auth),
                client.get(SEARCH, params=params, headers={"Authorization": "Bearer nm_wrong"}),
            ):
                assert_refused_without_chat(response, 503)  # the tokens read before are not trusted
                assert str(path) not in response.text and str(tmp_path) not in response.text
                assert_guarded(response)
            assert client.get(SEARCH, params=params).status_code == 401  # no token at all: refused as ever
            path.write_text(good)
            assert client.get(SEARCH, params=params, headers=auth).status_code == 200


# -- a client that hangs up mid-body (a real uvicorn server) --------------------------------------------
def test_a_truncated_body_logs_one_line_and_no_traceback(retriever, tmp_path, caplog):
    event_log = EventLog(tmp_path / "events")
    app = create_app(retriever, event_log, runs_root=tmp_path / "runs")
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, log_level="info"))
    thread = threading.Thread(target=server.run, daemon=True)
    caplog.set_level(logging.INFO)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
            time.sleep(0.02)
        caplog.clear()
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", port)) as raw:
                raw.sendall(
                    b"POST /api/ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 1000\r\n\r\n" + b'{"chat": "' + CHAT.encode()
                )
                time.sleep(0.2)  # the server is reading the body when the client goes
            time.sleep(0.3)
    finally:
        server.should_exit = True
        thread.join(30)
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "Traceback" not in text and not any(r.exc_info for r in caplog.records)
    assert [r.getMessage() for r in lines] == [
        "memory API: POST /api/ask: the client disconnected before sending its whole body"
    ] * 3
    assert event_log.events().height == 0
