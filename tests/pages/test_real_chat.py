"""The inspector on a real group chat export (tests/pages/export_chat.py, read by the WhatsApp
reader in Europe/Berlin and served by uvicorn): no row's id, author and text overlap at 1400 and
800 px in Chromium; system lines, attachments, edits and reactions shown; times in the chat's zone, in the
pages and in ``POST /api/ask``'s JSON; the evaluation page of a chat without gold questions says
so and what to do instead. Screenshots: ``transcript_real_chat`` and ``evaluation_no_gold``."""

from __future__ import annotations

import httpx
import pytest
from export_chat import EDITED, LONG_NAME, PHOTO, REACTED, SYSTEM_LINES, ZONE, build_export_chat, build_reactions_chat
from inspector_browser import LoopbackServer
from selenium.webdriver.common.by import By

# Every row's id, author, time and text as painted (the extent of their text, cut to the element's
# box where it clips its overflow), the row's box, and the page's width against the window's.
ROW_BOXES = """
function painted(e) {
  const range = document.createRange();
  range.selectNodeContents(e);
  const text = range.getBoundingClientRect(), box = e.getBoundingClientRect();
  const clips = getComputedStyle(e).overflowX !== 'visible';
  return {cls: e.className || e.tagName,
          left: clips ? Math.max(text.left, box.left) : text.left, right: clips ? Math.min(text.right, box.right) : text.right,
          top: clips ? Math.max(text.top, box.top) : text.top, bottom: clips ? Math.min(text.bottom, box.bottom) : text.bottom};
}
const boxes = [];
for (const row of document.querySelectorAll('.transcript .msg')) {
  const outer = row.getBoundingClientRect();
  const parts = [...row.querySelectorAll('.mid, .who, time, .text')].map(painted).filter(p => p.right > p.left);
  boxes.push({id: row.dataset.id, row: {left: outer.left, right: outer.right}, parts});
}
return {boxes, scroll: document.documentElement.scrollWidth, width: document.documentElement.clientWidth};
"""


def overlaps(a: dict, b: dict) -> bool:
    return (
        a["left"] < b["right"] - 0.5
        and b["left"] < a["right"] - 0.5
        and a["top"] < b["bottom"] - 0.5
        and b["top"] < a["bottom"] - 0.5
    )


def _site(built, embedder):
    """(base URL, chat key) of an open inspector serving ``built`` (chat key, home, index) alone."""
    from api.app import create_app
    from narrative_mirror.events.writer import EventLog
    from narrative_mirror.retrieval.engine import Retriever

    chat, home, index = built
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NM_HOME", str(home))
        app = create_app(Retriever(index, embedder), EventLog(home / "lancedb", embedder=embedder))
    with LoopbackServer(app) as base:
        yield base, chat


@pytest.fixture(scope="module")
def export_site(embedder, tmp_path_factory):
    yield from _site(build_export_chat(tmp_path_factory.mktemp("export"), embedder), embedder)


@pytest.fixture(scope="module")
def reactions_site(embedder, tmp_path_factory):
    yield from _site(build_reactions_chat(tmp_path_factory.mktemp("reactions"), embedder), embedder)


@pytest.mark.parametrize("width", [1400, 800])
def test_no_row_overlaps_at_any_id_or_name_length(export_site, browser, width):
    base, chat = export_site
    browser.driver.set_window_size(width, 1000)
    browser.visit(f"{base}/chats/{chat}")
    measured = browser.driver.execute_script(ROW_BOXES)
    for row in measured["boxes"]:
        parts = row["parts"]
        assert len(parts) >= 3, row  # id, time, text (and the author on people's rows)
        for i, a in enumerate(parts):
            assert row["row"]["left"] - 0.5 <= a["left"] and a["right"] <= row["row"]["right"] + 0.5, (
                width,
                row["id"],
                a,
            )
            for b in parts[i + 1 :]:
                assert not overlaps(a, b), (width, row["id"], a, b)
    assert measured["scroll"] <= measured["width"]  # nothing pushes the page sideways
    assert len(measured["boxes"]) == 15  # every line, the system lines too
    browser.screenshot("transcript_real_chat" if width == 1400 else f"transcript_real_chat_{width}")


def test_transcript_shows_system_lines_attachments_edits_in_the_chat_zone(export_site, browser):
    base, chat = export_site
    browser.driver.set_window_size(1400, 1000)
    browser.visit(f"{base}/chats/{chat}")
    system = browser.css(".transcript .msg.system")
    assert [s.find_element(By.CSS_SELECTOR, ".text").text for s in system][3:] == [
        "João 🇵🇹 Silva added Tia Rosa",
        "Tia Rosa left",
        "Missed voice call",
    ]
    assert len(system) == SYSTEM_LINES and all(not s.find_elements(By.CSS_SELECTOR, ".who") for s in system)
    assert "end-to-end encrypted" in system[0].text
    assert system[0].find_element(By.CSS_SELECTOR, ".text").value_of_css_property("text-align") == "center"
    photo = browser.one(".transcript .attachment.photo")
    assert photo.text == f"photo {PHOTO}"
    assert [a.find_element(By.CSS_SELECTOR, ".badge").text for a in browser.css(".transcript .attachment")] == [
        "photo",
        "document",
        "audio",
        "sticker",
    ]
    edited = browser.one(".transcript .msg .badge.edited").find_element(By.XPATH, "../..")
    assert edited.find_element(By.CSS_SELECTOR, ".body").text == EDITED
    first = browser.css(".transcript .msg:not(.system)")[0]
    assert first.find_element(By.CSS_SELECTOR, ".who").text == LONG_NAME
    assert first.find_element(By.TAG_NAME, "time").get_attribute("datetime") == "2024-03-12T09:20:41+01:00"
    assert first.find_element(By.TAG_NAME, "time").text == "Tue 12 Mar 2024 09:20"
    assert browser.one("#times").text == f"times in {ZONE}"
    assert "9 messages and 6 system lines" in browser.one("p.meta").text


def test_reactions_show_under_their_message_with_who_reacted(reactions_site, browser):
    base, chat = reactions_site
    browser.driver.set_window_size(1400, 1000)
    browser.visit(f"{base}/chats/{chat}")
    reacted = next(
        m for m in browser.css(".transcript .msg") if m.find_element(By.CSS_SELECTOR, ".body").text == REACTED
    )
    # Telegram names the latest few who reacted: the rest are counted.
    assert [r.text for r in reacted.find_elements(By.CSS_SELECTOR, ".reactions .reaction")] == [
        "👍 Sam, Dee",
        "❤ Sam and 4 more",
    ]
    others = [m for m in browser.css(".transcript .msg") if m != reacted]
    assert others and not any(m.find_elements(By.CSS_SELECTOR, ".reactions") for m in others)
    browser.screenshot("transcript_reactions")
    # An answer's evidence carries them too (`POST /api/ask`, `ask --json`).
    evidence = {e["text"]: e["reactions"] for e in ask(base, chat, "Who is on the rota on Wednesday?")["evidence"]}
    assert evidence[f"Priti: {REACTED}"] == [
        {"emoji": "👍", "people": ["Sam", "Dee"], "count": 2},
        {"emoji": "❤", "people": ["Sam"], "count": 5},
    ]
    assert not any(reactions for text, reactions in evidence.items() if text != f"Priti: {REACTED}")


def ask(base: str, chat: str, question: str) -> dict:
    """The API's answer (profile fast) to ``question`` about ``chat``."""
    return httpx.post(
        f"{base}/api/ask", json={"chat": chat, "question": question, "profile": "fast"}, timeout=120
    ).json()


def test_answer_json_times_carry_the_chat_offset(export_site):
    base, chat = export_site
    answer = ask(base, chat, "Who is bringing the car to Lagos?")
    assert answer["evidence"] and answer["time_zones"] == [ZONE]
    assert all(e["timestamp"].endswith("+01:00") for e in answer["evidence"])
    assert "2024-03-13T20:05:00+01:00" in [e["timestamp"] for e in answer["evidence"]]


def test_only_the_claim_that_states_what_is_asked_is_verified(export_site):
    """The booking names the house in Lagos, not what is in front of it: its phrase is neither in
    the answer nor verified; the edited "That's the beach right in front of it" is both."""
    base, chat = export_site
    answer = ask(base, chat, "What is right in front of the house in Lagos?")
    verified = [c["text"] for c in answer["claims"] if c["verified"]]
    assert verified == ["beach"]
    assert "beach" in answer["answer"] and "July" not in answer["answer"]


def test_evaluation_of_a_chat_without_gold_says_what_to_do(export_site, browser):
    base, chat = export_site
    browser.driver.set_window_size(1400, 1000)
    browser.visit(f"{base}/evaluation")
    assert "1 chat has no gold questions" in browser.one("#no-gold").text
    browser.one("#no-gold a[href='/evaluation/" + chat + "']").click()
    advice = browser.one("#no-gold")
    assert advice.text.startswith("This chat has no gold questions, so there is nothing to evaluate.")
    assert f"narrative-mirror trace --data FOLDER --chat {chat} --gold ID,ID" in advice.text
    browser.screenshot("evaluation_no_gold")
    advice.find_element(By.CSS_SELECTOR, "a.ask-link").click()
    assert browser.driver.current_url == f"{base}/chats/{chat}/ask"
    assert browser.one("h1").text == chat


def test_ask_page_marks_the_edited_message_in_the_evidence_list(export_site, browser):
    base, chat = export_site
    answer = ask(base, chat, "What is right in front of the house in Lagos?")
    edited_ids = {e["id"] for e in answer["evidence"] if e["edited"]}
    plain_ids = {e["id"] for e in answer["evidence"] if not e["edited"]}
    assert len(edited_ids) == 1 and plain_ids  # the edited message and others beside it
    browser.driver.set_window_size(1400, 1000)
    browser.visit(f"{base}/chats/{chat}/ask?q=What+is+right+in+front+of+the+house+in+Lagos%3F&profile=fast")
    items = browser.css(".evidence ul.points li")
    marked = {
        li.find_element(By.CSS_SELECTOR, "a.cite").text: li.find_elements(By.CSS_SELECTOR, ".badge.edited")
        for li in items
    }
    assert set(marked) == edited_ids | plain_ids
    assert {i for i, badges in marked.items() if badges} == edited_ids
    assert [b.text for b in marked[next(iter(edited_ids))]] == ["edited"]
    badges = [li.find_element(By.CSS_SELECTOR, ".badge").text for li in browser.css("li.claim")]
    assert sorted(badges) == ["in the evidence, does not state what is asked", "verified"]
    browser.screenshot("ask_real_chat_edited")
