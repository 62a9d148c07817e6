"""The human printers: chat-derived fields reach the terminal with control and bidi characters
escaped, and one message cannot forge a line of the program's own output."""

from __future__ import annotations

from cli.printers import print_human

EVIL = "hi\x1b]0;pwned\x07\r\nAnswer: forged\u202e"
SHOWN = "hi\\x1b]0;pwned\\x07\\x0d\\nAnswer: forged\\u202e"


def test_answer_fields_are_escaped(capsys):
    print_human("ask", {
        "answer": EVIL, "evidence": [{"id": "D1:1", "text": f"Ana: {EVIL}", "point": "grade 0.90"}],
        "unknowns": [EVIL], "route": "direct", "profile": "fast", "stop_reason": "coverage_met",
        "degraded": True, "degraded_reason": EVIL,
    })
    assert capsys.readouterr().out.splitlines() == [
        f"Answer: {SHOWN}",
        "Evidence:",
        f"  [D1:1] Ana: {SHOWN}",
        "      -> grade 0.90",
        "Unknowns:",
        f"  - {SHOWN}",
        f"(route direct, profile fast, stop: coverage_met, DEGRADED: {SHOWN})",
    ]


def test_arc_phases_are_escaped(capsys):
    print_human("arc", {"phases": [{"name": "seeds\x1b[2J", "summary": EVIL, "evidence": ["D1:1", "D1:2"]}],
                        "unknowns": ["\u202egone"]})
    assert capsys.readouterr().out.splitlines() == [
        f"1. seeds\\x1b[2J: {SHOWN}", "   evidence: D1:1, D1:2", "  unknown: \\u202egone"]


def test_trace_query_is_escaped(capsys):
    print_human("trace", {"candidates": [{"id": "D1:1", "score": 0.5}], "reranked": [], "final": [],
                          "route": "direct", "gold": {},
                          "searches": [{"kind": "question", "query": "tomatoes\r\x1b[1A", "found": ["D1:1"],
                                        "selected": []}]})
    out = capsys.readouterr().out
    assert '  question   "tomatoes\\x0d\\x1b[1A": found D1:1' in out.splitlines()
    assert "\x1b" not in out and "\r" not in out


def test_key_value_lines_are_escaped(capsys):
    print_human("build", {"chat": "evil\x1b[2J", "per_file": {"a\u202eb": {"rows": 3}}})
    assert capsys.readouterr().out.splitlines() == ["build: chat=evil\\x1b[2J", "  a\\u202eb: rows=3"]
