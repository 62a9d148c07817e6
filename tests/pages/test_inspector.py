"""The web inspector in a real headless Chromium against real `serve` apps (uvicorn on loopback)
over a memory built and evaluated by the command line: each view, the token scope, no request
off the machine, and chat text with ``<script>`` shown, never run."""

from __future__ import annotations

import re
import time
from urllib.parse import quote

import httpx
import polars as pl
import pytest
from inspector_browser import GARDEN, HOSTILE, IMG_TEXT, SCRIPT_TEXT, off_machine
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from api.guard import PAGE_CSP
from narrative_mirror import query, storage

QUESTION = "When did Theo sprain his ankle?"


def stored(home, asset: str, chat: str) -> pl.DataFrame:
    return storage.read_frame(storage.frame_path(home / "storage", asset, chat))


def ids(elements) -> list[str]:
    return [e.get_attribute("data-id") for e in elements]


def wait_for(condition, seconds: float = 10.0) -> None:
    """Until ``condition()`` holds: the login page's script answers after its fetch returns."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def settled(browser, refusals: bool = False) -> None:
    """Each page: nothing requested off the machine, no console error (a CSP violation is one);
    ``refusals``: the 401 / 403 answers the test asked for are not errors."""
    urls = browser.take()
    assert urls and not off_machine(urls) and all(u.startswith(("http://127.0.0.1:", "data:")) for u in urls)
    entries = browser.driver.execute_script("return performance.getEntries().map(e => e.name)")
    assert not off_machine([e for e in entries if "://" in e])
    errors = browser.console_errors()
    if refusals:
        errors = [e for e in errors if not re.search(r"status of 40[13] \((Unauthorized|Forbidden)\)$", e)]
    assert errors == []


def test_chats_page_and_a_message_link(servers, browser):
    site, _ = servers
    messages = stored(site.home, "messages", GARDEN)
    blocks = stored(site.home, "l1_topics", GARDEN)
    browser.visit(f"{site.base}/chats")
    row = browser.one("a.chat-link[href='/chats/demo_garden_Mara_Theo']").find_element(By.XPATH, "../..")
    cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
    assert cells[:6] == [
        GARDEN,
        "Mara, Theo",
        str(messages.height),
        str(messages["session"].n_unique()),
        "2 Apr 2024",
        messages["timestamp"].max().strftime("%-d %b %Y"),
    ]
    assert cells[6] == f"{blocks.height} blocks, 0 threads"
    browser.screenshot("chats")
    settled(browser)

    row.find_element(By.CSS_SELECTOR, "a.chat-link").click()
    assert len(browser.css(".transcript .msg")) == messages.height
    assert len(browser.css("h2.session")) == messages["session"].n_unique()
    assert len(browser.css("details.block")) == blocks.height
    browser.screenshot("transcript")
    settled(browser)

    browser.one(".msg[data-id='D2:2'] a.mid").click()  # the message's stable link
    assert browser.driver.current_url == f"{site.base}/chats/{GARDEN}#D2:2"
    assert browser.driver.execute_script("return document.querySelector(':target').dataset.id") == "D2:2"
    band = browser.css("details.block")[0]
    band.find_element(By.TAG_NAME, "summary").click()  # a block band closes and opens again
    assert band.get_attribute("open") is None
    band.find_element(By.TAG_NAME, "summary").click()
    assert band.get_attribute("open") == "true"


def test_ask_highlights_the_evidence_in_the_transcript(servers, browser):
    site, _ = servers
    expected = httpx.post(f"{site.base}/api/ask", json={"chat": GARDEN, "question": QUESTION}, timeout=120).json()
    evidence = [e["id"] for e in expected["evidence"]]
    assert evidence
    browser.visit(f"{site.base}/chats/{GARDEN}/ask")
    browser.one("form.ask input[name=q]").send_keys(QUESTION)
    browser.one("form.ask button").click()
    # the click returns before the answered page has loaded on a loaded machine
    wait_for(lambda: "?q=" in browser.driver.current_url, seconds=60)
    assert (
        browser.driver.current_url
        == f"{site.base}/chats/{GARDEN}/ask?q={quote(QUESTION, safe='').replace('%20', '+')}&profile=balanced"
    )
    assert browser.one("#answer").text == expected["answer"]
    assert ids(browser.css(".evidence .msg.hl")) == sorted(
        evidence, key=lambda i: (int(i[1:].split(":")[0]), int(i.split(":")[1]))
    )
    claims = browser.css("li.claim")
    assert [c.get_attribute("class").split()[-1] for c in claims] == [
        "supported" if c["supported"] else "unsupported" for c in expected["claims"]
    ]
    # the green badge only for a claim whose own messages state what the question asks
    assert [c.find_element(By.CSS_SELECTOR, ".badge").text == "verified" for c in claims] == [
        c["verified"] for c in expected["claims"]
    ]
    assert [u.text for u in browser.css(".unknowns li")] == expected["unknowns"]
    browser.screenshot("ask")
    settled(browser)

    browser.one("#open-in-transcript").click()
    assert sorted(ids(browser.css(".transcript .msg.hl"))) == sorted(evidence)
    assert browser.driver.execute_script("return document.querySelector(':target').dataset.id") in evidence
    settled(browser)


def test_evaluation_question_shows_gold_and_missed(servers, browser):
    site, _ = servers
    qa = stored(site.home, "qa_eval", GARDEN)
    browser.visit(f"{site.base}/evaluation")
    row = browser.one(f"a.eval-chat[href='/evaluation/{GARDEN}']").find_element(By.XPATH, "../..")
    cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
    assert cells[:5] == [
        GARDEN,
        "train",
        str(qa.height),
        f"{qa['recall@10'].mean():.3f}",
        f"{qa['exact_recall'].mean():.3f}",
    ]
    # the log's one train summary, and one point per evaluated chat at that record
    assert len(browser.css("#recall-plot g.series")) == 3
    assert len(browser.css("#recall-plot circle")) == 3
    browser.screenshot("evaluation")
    settled(browser)

    row.find_element(By.CSS_SELECTOR, "a.eval-chat").click()
    wait_for(lambda: browser.driver.current_url.endswith(f"/evaluation/{GARDEN}"), seconds=30)
    assert len(browser.css("tr.question")) == qa.height
    Select(browser.one("select[name=lost]")).select_by_value("ranked_too_low")
    browser.one("form.filters button").click()
    wait_for(lambda: "lost=ranked_too_low" in browser.driver.current_url, seconds=30)
    too_low = qa.filter(pl.col("lost_ranked_too_low").list.len() > 0)
    assert [r.text for r in browser.css("tr.question a.qlink")] == [
        q.rpartition("/")[2] for q in too_low["question_id"]
    ]
    settled(browser)

    Select(browser.one("select[name=category]")).select_by_value("2")
    browser.one("form.filters button").click()
    wait_for(lambda: "category=2" in browser.driver.current_url, seconds=30)
    assert browser.driver.current_url.endswith(f"/evaluation/{GARDEN}?category=2&lost=ranked_too_low")
    both = too_low.filter(pl.col("category") == 2)
    assert [r.text for r in browser.css("tr.question a.qlink")] == [q.rpartition("/")[2] for q in both["question_id"]]
    settled(browser)

    first = too_low.row(0, named=True)
    browser.visit(f"{site.base}/evaluation/{GARDEN}?lost=ranked_too_low")
    browser.css("tr.question a.qlink")[0].click()
    outcomes = {
        r.get_attribute("data-id"): r.find_element(By.CSS_SELECTOR, ".outcome").text for r in browser.css("tr.gold-row")
    }
    lost = {
        g: stage.replace("_", " ")
        for stage in ("never_candidate", "ranked_too_low", "dropped_at_selection")
        for g in first[f"lost_{stage}"]
    }
    assert outcomes == {g: lost.get(g, "found") for g in first["gold_ids"]}
    assert [a.text for a in browser.css("#missed a.missed-id")] == list(lost)
    assert sorted(ids(browser.css(".excerpt .msg.gold"))) == sorted(first["gold_ids"])
    assert ids(browser.css("tr.returned-row")) == first["ranked_ids"][:10]
    assert ids(browser.css("tr.returned-row.gold")) == [i for i in first["ranked_ids"][:10] if i in first["gold_ids"]]
    browser.screenshot("evaluation_question")
    settled(browser)


def test_a_story_shows_its_phases_on_a_time_line(servers, browser):
    site, _ = servers
    case = stored(site.home, "arc_cases", GARDEN).row(0, named=True)
    expected = query.arc(site.retriever, GARDEN, case["query"])
    browser.visit(f"{site.base}/chats/{GARDEN}/story")
    browser.css("ul.suggestions a")[0].click()
    phases = browser.css("li.phase")
    assert [p.find_element(By.TAG_NAME, "h2").text for p in phases] == [p.name for p in expected.phases]
    assert len(browser.css("svg.timeline rect.band")) == len(expected.phases)
    for shown, phase in zip(phases, expected.phases):
        assert ids(shown.find_elements(By.CSS_SELECTOR, ".msg.hl")) == phase.evidence
    browser.screenshot("story")
    settled(browser)


def test_tokens_refuse_a_chat_outside_the_scope(servers, browser):
    _, guarded = servers
    browser.driver.delete_all_cookies()
    browser.visit(f"{guarded.base}/chats/{GARDEN}")
    assert browser.driver.current_url == f"{guarded.base}/login?next=%2Fchats%2F{GARDEN}"
    browser.one("#token").send_keys("nm_not-a-token")
    browser.one("#login button").click()
    wait_for(lambda: browser.one("#login-error").is_displayed())
    browser.one("#token").clear()
    browser.one("#token").send_keys(guarded.token)
    browser.one("#login button").click()
    wait_for(lambda: browser.driver.current_url.endswith(f"/chats/{GARDEN}"))
    assert browser.driver.current_url == f"{guarded.base}/chats/{GARDEN}"
    assert browser.driver.execute_script("return document.cookie") == ""  # HttpOnly: no script reads it
    browser.visit(f"{guarded.base}/chats")
    assert [a.text for a in browser.css("a.chat-link")] == [GARDEN]
    for refused in (
        f"/chats/{HOSTILE}",
        f"/chats/{HOSTILE}/ask?q=cake",
        f"/evaluation/{HOSTILE}",
        "/chats/demo_no_such_chat",
    ):
        browser.visit(guarded.base + refused)
        assert browser.one("h1.refused").text == "403"
        assert "hostile" not in browser.driver.page_source.lower().replace(refused.lower(), "")
        assert "no_such" not in browser.css("main")[0].text
    browser.screenshot("refused")
    settled(browser, refusals=True)

    browser.visit(f"{guarded.base}/chats")
    browser.one("#sign-out").click()  # the cookie is gone: the next page asks for the token again
    wait_for(lambda: "/login" in browser.driver.current_url)
    browser.visit(f"{guarded.base}/chats")
    assert browser.driver.current_url == f"{guarded.base}/login?next=%2Fchats"
    settled(browser)


def test_sign_in_sends_the_browser_back_to_this_site_only(servers, browser):
    _, guarded = servers
    browser.visit(f"{guarded.base}/login?next=%2F%09%2Fevil.example%2Fx")  # a tab: the browser would drop it
    assert browser.one("#login").get_attribute("data-next") == "/chats"
    where = "return sameSitePath(arguments[0])"  # inspector.js, in the browser's own URL parser
    for hostile in (
        "/\t/evil.example/x",
        "//evil.example/x",
        "/\\evil.example",
        "https://evil.example/x",
        "javascript:alert(1)",
    ):
        assert browser.driver.execute_script(where, hostile) == "/chats", hostile
    assert browser.driver.execute_script(where, f"/chats/{GARDEN}?hl=a#m") == f"/chats/{GARDEN}?hl=a#m"


def test_script_in_chat_text_is_shown_not_run(servers, browser):
    site, _ = servers
    browser.visit(f"{site.base}/chats/{HOSTILE}")
    texts = [e.text for e in browser.css(".transcript .msg .text")]
    assert SCRIPT_TEXT in texts and IMG_TEXT in texts
    assert browser.driver.execute_script("return window.__nmPwned === undefined")
    with pytest.raises(NoAlertPresentException):
        _ = browser.driver.switch_to.alert.text
    settled(browser)


def test_pages_carry_the_page_policy_and_the_cookie_is_strict(servers):
    site, guarded = servers
    page = httpx.get(f"{site.base}/chats")
    assert page.headers["content-security-policy"] == PAGE_CSP
    assert httpx.get(f"{site.base}/api/health").headers["content-security-policy"].startswith("default-src 'none'")
    assert httpx.post(f"{guarded.base}/login", json={"token": "nm_wrong"}).status_code == 401
    signed = httpx.post(f"{guarded.base}/login", json={"token": guarded.token})
    assert signed.status_code == 204
    cookie = signed.headers["set-cookie"]
    assert cookie.startswith("nm_session=") and guarded.token not in cookie  # a signed session, not the token
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert httpx.post(f"{guarded.base}/login", data={"token": guarded.token}).status_code == 415  # JSON only
    refused = httpx.get(f"{guarded.base}/chats/{HOSTILE}", headers={"Authorization": f"Bearer {guarded.token}"})
    assert refused.status_code == 403 and HOSTILE not in refused.text
    assert httpx.get(f"{guarded.base}/chats", follow_redirects=False).status_code == 303
