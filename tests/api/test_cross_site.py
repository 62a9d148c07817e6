"""What another site can make a browser do, on a real app over a real LanceDB: a link or image
on another site never runs an ask or a search (Sec-Fetch-Site / Origin), a redirect never echoes
a foreign Host, sign-in sends the browser back to this site only, and the session cookie holds no
token."""

from __future__ import annotations

import pytest
from memory_api_chat import CHAT
from starlette.testclient import TestClient

from api.access import add_token, load_tokens, remove_token
from api.app import create_app
from api.pages.login import COOKIE, safe_target
from narrative_mirror.events.writer import EventLog

ASK_PAGE = f"/chats/{CHAT}/ask"
QUESTION = {"q": "Where does Ana work?", "profile": "fast"}


def test_a_cross_site_get_of_an_ask_page_or_a_search_runs_nothing(retriever, tmp_path):
    event_log = EventLog(tmp_path / "events")
    app = create_app(retriever, event_log, runs_root=tmp_path / "runs")  # open API, on loopback
    with TestClient(app, base_url="http://localhost") as client:
        for headers in (
            {"Sec-Fetch-Site": "cross-site"},
            {"Sec-Fetch-Site": "same-site"},
            {"Origin": "http://evil.example"},
            {"Origin": "null"},
        ):
            asked = client.get(ASK_PAGE, params=QUESTION, headers=headers)
            assert asked.status_code == 403 and "another site" in asked.json()["error"]["message"]
            searched = client.get("/api/memory/search", params={"q": "rye", "chat": CHAT}, headers=headers)
            assert searched.status_code == 403
        # a link from another site still opens a page that runs nothing
        assert client.get(f"/chats/{CHAT}", headers={"Sec-Fetch-Site": "cross-site"}).status_code == 200
        assert client.get(ASK_PAGE, headers={"Sec-Fetch-Site": "cross-site"}).status_code == 200
        event_log.flush()
        assert event_log.events().height == 0
        assert not (tmp_path / "runs").exists()  # no search ran
        # the browser's own word first: behind a proxy the Origin may name a host other than the Host it forwards
        for headers in (
            {"Sec-Fetch-Site": "same-origin"},
            {"Sec-Fetch-Site": "none"},
            {"Origin": "http://localhost"},
            {"Sec-Fetch-Site": "same-origin", "Origin": "https://nm.example.org"},
        ):
            assert client.get(ASK_PAGE, params=QUESTION, headers=headers).status_code == 200
        event_log.flush()
        assert event_log.events().height == 4


def test_redirects_never_echo_a_foreign_host(retriever, tmp_path):
    path = tmp_path / "tokens.json"
    add_token(path, "ana", ["*"])
    app = create_app(retriever, EventLog(tmp_path / "events"), runs_root=tmp_path / "runs", tokens=load_tokens(path))
    with TestClient(app, base_url="http://evil.example") as client:
        for target, expected in (
            ("/chats/", "/chats"),
            ("/api/health/", "/api/health"),
            ("/", "/chats"),
            ("/chats", "/login?next=%2Fchats"),
        ):
            response = client.get(target, follow_redirects=False)
            assert response.status_code in (303, 307), target
            assert response.headers["location"] == expected


@pytest.mark.parametrize(
    "target",
    [
        "/\t/evil.example/x",
        "/\n/evil.example",
        "/\r\n/evil.example",
        "/ /evil.example",
        "/\x0b/evil.example",
        "https:/evil.example",
        "/\x7f/evil.example",
    ],
)
def test_sign_in_never_sends_the_browser_to_another_site(target):
    assert safe_target(target) == "/chats"


def test_the_session_cookie_holds_no_token_and_ends_with_the_token(retriever, tmp_path):
    path = tmp_path / "tokens.json"
    token = add_token(path, "ana.laptop", ["*"])
    app = create_app(retriever, EventLog(tmp_path / "events"), runs_root=tmp_path / "runs", tokens=load_tokens(path))
    with TestClient(app, base_url="http://localhost") as client:
        page = client.get("/login", params={"next": "/\t/evil.example/"})
        assert 'data-next="/chats"' in page.text
        signed = client.post("/login", json={"token": token})
        assert signed.status_code == 204
        cookie = signed.headers["set-cookie"]
        assert token not in cookie and token[3:20] not in cookie and f"{COOKIE}=ana.laptop." in cookie
        assert "Max-Age=43200" in cookie and "HttpOnly" in cookie
        assert client.get("/chats", follow_redirects=False).status_code == 200
        value = client.cookies[COOKIE]
        client.cookies.clear()
        name, until, signature = value.rsplit(".", 2)

        def page_with(cookie: str) -> int:
            return client.get("/chats", headers={"Cookie": f"{COOKIE}={cookie}"}, follow_redirects=False).status_code

        assert page_with(value) == 200
        assert page_with(f"{name}.{int(until) + 3600}.{signature}") == 303  # a longer session is not signed
        assert page_with(f"other.{until}.{signature}") == 303
        remove_token(path, "ana.laptop")
        add_token(path, "ana.laptop", ["*"])  # the same name, a new token: the old session ends
        assert page_with(value) == 303
