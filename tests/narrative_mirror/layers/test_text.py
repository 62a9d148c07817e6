from __future__ import annotations

import pytest

from narrative_mirror.layers.text import content_tokens, tfidf_keywords, tokens, truncate


def test_tokens_and_content_tokens():
    assert tokens("I’m SO excited for Lisbon's trams, 2 days!") == [
        "i'm",
        "so",
        "excited",
        "for",
        "lisbon's",
        "trams",
        "2",
        "days",
    ]
    # stopwords, numbers, short words and excluded names go
    assert content_tokens("Ana and I’m going to Lisbon in 2 days, ok?", exclude=["Ana"]) == ["lisbon", "days"]


def test_tfidf_keywords_prefer_terms_special_to_a_doc():
    docs = [["pasta", "pasta", "sauce", "dinner"], ["marathon", "knee", "dinner"], ["dinner"]]
    # idf = ln(4 / (1 + df)) + 1: pasta 2 * (ln 2 + 1) beats sauce (ln 2 + 1) beats dinner (ln 1 + 1 = 1).
    assert tfidf_keywords(docs, 2) == [["pasta", "sauce"], ["knee", "marathon"], ["dinner"]]


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("short text", 20, "short text"),
        ("one two three four", 10, "one two…"),
        ("one two three four", 14, "one two three…"),  # the cut falls right after "three"
        ("  spaced\n\nout   text ", 30, "spaced out text"),
        ("abcdefghijklmnop", 8, "abcdefg…"),
    ],
)
def test_truncate(text, limit, expected):
    assert truncate(text, limit) == expected
    assert len(truncate(text, limit)) <= limit
