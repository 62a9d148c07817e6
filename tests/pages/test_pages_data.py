"""What the inspector's pages read, without a browser: transcript excerpts, the recall@10 history
over the experiment log and who may see which series, the login redirect target, and the pages
over an index without stored parquet layers (Starlette's test client, a real LanceDB)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import polars as pl
import pytest
from memory_api_chat import CHAT, build_retriever
from starlette.testclient import TestClient

from api.app import create_app
from api.pages.evaluation import Series, recall_history
from api.pages.login import safe_target
from api.pages.store import Message, PageStore, Transcript
from narrative_mirror import schema, storage
from narrative_mirror.events.writer import EventLog

START = datetime(2024, 5, 1, 9, 0)


def test_excerpts_take_neighbours_and_merge_overlaps():
    messages = [Message(f"D1:{i + 1}", i, 1, "Ana", f"text {i}", START + timedelta(minutes=i), "") for i in range(10)]
    transcript = Transcript("c", messages, [], [])
    excerpts = transcript.excerpts(["D1:2", "D1:4", "D1:9", "D7:7"], width=1)
    assert [[m.local_id for m in x] for x in excerpts] == [
        ["D1:1", "D1:2", "D1:3", "D1:4", "D1:5"],
        ["D1:8", "D1:9", "D1:10"],
    ]


def _qa_rows(fingerprint: str, recalls: list[float]) -> pl.DataFrame:
    n = len(recalls)
    return pl.DataFrame(
        {
            "question_id": [f"c/q{i:03d}" for i in range(n)],
            "category": [1] * n,
            "gold_ids": [["D1:1"]] * n,
            "ranked_ids": [["D1:1"]] * n,
            "recall@10": recalls,
            "exact_recall": recalls,
            "lost_never_candidate": [[]] * n,
            "lost_ranked_too_low": [[]] * n,
            "lost_dropped_at_selection": [[]] * n,
            "fingerprint": [fingerprint] * n,
        }
    )


def test_recall_history_per_chat_and_per_split(tmp_path):
    home = tmp_path / "home"
    records = [
        {
            "kind": "summary",
            "fingerprint": "f1",
            "included": {"train": ["A", "B"], "test": []},
            "metrics": {"train": {"recall@10": 0.5}},
        },
        {"kind": "test_eval", "fingerprint": "f1", "partition": "C", "metrics": {"test": {"recall@10": 0.7}}},
        {
            "kind": "summary",
            "fingerprint": "f2",
            "included": {"train": ["A", "B"], "test": []},
            "metrics": {"train": {"recall@10": 0.55, "per_chat": {"A": {"recall@10": 0.6}}}},
        },
    ]
    (home / "experiments").mkdir(parents=True)
    (home / "experiments" / "experiments.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    storage.write_frame(storage.frame_path(home / "storage", "qa_eval", "B"), _qa_rows("f1", [0.25, 0.75]))
    storage.write_frame(storage.frame_path(home / "storage", "qa_eval", "A"), _qa_rows("f2", [1.0]))
    store = PageStore(None, home)

    read, series = recall_history(store, ["A", "B", "C"], all_visible=True)
    assert len(read) == 3
    assert series == [
        Series("A", ((2, 0.6),), True),
        Series("B", ((0, 0.5),), True),
        Series("C", ((1, 0.7),), True),
        Series("train (all chats)", ((0, 0.5), (2, 0.55)), False),
    ]
    # a token that reads A only: neither another chat's line nor a summary over chats it cannot read
    assert recall_history(store, ["A"], all_visible=False)[1] == [Series("A", ((2, 0.6),), True)]


@pytest.mark.parametrize(
    ("target", "kept"),
    [
        ("/chats/x/ask?q=a", "/chats/x/ask?q=a"),
        ("//evil.example/x", "/chats"),
        ("https://evil.example", "/chats"),
        ("/\\evil.example", "/chats"),
        ("/\t/evil.example/x", "/chats"),
        ("", "/chats"),
        (None, "/chats"),
    ],
)
def test_login_sends_the_browser_back_to_this_site_only(target, kept):
    assert safe_target(target) == kept


@pytest.fixture(scope="module")
def tiny_site(embedder, tmp_path_factory):
    """The pages over the tiny chat's index, with one stored L2 thread (the bakery storyline over
    blocks 0 and 2) and no other stored layer, no evaluation, no log."""
    root = tmp_path_factory.mktemp("pages")
    retriever = build_retriever(root / "lancedb", embedder)
    thread = pl.DataFrame(
        [
            {
                "thread_id": f"{CHAT}/T0",
                "chat_file": CHAT,
                "block_ids": [f"{CHAT}/S1/B0", f"{CHAT}/S2/B2"],
                "start_time": datetime(2024, 3, 1, 9, 0),
                "end_time": datetime(2024, 3, 11, 9, 5),
                "participants": ["Ana", "Ben"],
                "entities": ["bakery"],
                "title": "Ana's job at the bakery",
                "summary": "From the first day to forty loaves.",
            }
        ],
        schema=schema.THREADS,
    )
    storage.write_frame(storage.frame_path(root / "home" / "storage", "l2_threads", CHAT), thread)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NM_HOME", str(root / "home"))
        app = create_app(retriever, EventLog(root / "lancedb", embedder=embedder))
    with TestClient(app, base_url="http://localhost") as client:
        client.home = root / "home"
        yield client


def test_the_evaluation_page_shows_a_standing_regression_until_it_is_accepted(tiny_site):
    from narrative_mirror import regressions

    regressions.record(
        tiny_site.home,
        "qa_eval",
        CHAT,
        "run0abcdef",
        [{"check": "qa_recall_regression", "severity": "ERROR", "description": "exact_recall 0.600 -> 0.400"}],
    )
    page = tiny_site.get("/evaluation").text
    assert 'id="standing-regressions"' in page
    assert f"standing regression of qa_eval on {CHAT} since run run0abcd" in page
    regressions.accept(tiny_site.home, "qa_eval", CHAT)
    assert 'id="standing-regressions"' not in tiny_site.get("/evaluation").text


def test_pages_read_the_index_when_no_layer_is_stored(tiny_site):
    page = tiny_site.get(f"/chats/{CHAT}", params={"hl": "D1:2,D11:1,nope"})
    assert page.status_code == 200
    assert page.text.count('<details class="block" open') == 4  # the index's four blocks
    assert page.text.count('class="msg hl evidence"') == 2
    assert page.text.count('<h2 class="session"') == 2
    assert page.text.count('<details class="thread"') == 1 and "<b>Ana&#39;s job at the bakery</b>" in page.text
    assert f'<a href="#block-{CHAT}/S1/B0">' in page.text and f'<a href="#block-{CHAT}/S2/B2">' in page.text
    assert page.text.count('<span class="tag">thread</span>') == 2
    assert 'id="D11:4"' in page.text and 'href="/chats/tiny_bakery_Ana_Ben#D11:4"' in page.text
    assert "No served chat has been evaluated yet" in tiny_site.get("/evaluation").text
    assert tiny_site.get("/", follow_redirects=False).headers["location"] == "/chats"
    assert tiny_site.get("/login", follow_redirects=False).headers["location"] == "/chats"  # open: no sign-in
    assert "This chat has no gold questions" in tiny_site.get(f"/evaluation/{CHAT}").text  # none stored


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/chats/no_such_chat", 404, "no indexed chat has that key"),
        ("/chats/bad'key", 400, "that is not a chat key"),
        (f"/evaluation/{CHAT}/q999", 404, "no evaluated question has that key"),
    ],
)
def test_refusals_are_pages(tiny_site, path, status, message):
    page = tiny_site.get(path)
    assert page.status_code == status and page.headers["content-type"].startswith("text/html")
    assert f'<p class="error" id="error-message">{message}</p>' in page.text
