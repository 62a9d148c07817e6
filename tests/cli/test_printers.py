"""The human printers: chat-derived fields reach the terminal with control and bidi characters
escaped, and one message cannot forge a line of the program's own output."""

from __future__ import annotations

import wcwidth

from cli.printers import print_human

EVIL = "hi\x1b]0;pwned\x07\r\nAnswer: forged\u202e"
SHOWN = "hi\\x1b]0;pwned\\x07\\x0d\\nAnswer: forged\\u202e"


def test_answer_fields_are_escaped(capsys):
    print_human(
        "ask",
        {
            "answer": EVIL,
            "evidence": [{"id": "D1:1", "text": f"Ana: {EVIL}", "point": "grade 0.90"}],
            "unknowns": [EVIL],
            "route": "direct",
            "profile": "fast",
            "stop_reason": "coverage_met",
            "degraded": True,
            "degraded_reason": EVIL,
        },
    )
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
    print_human(
        "arc",
        {
            "phases": [{"name": "seeds\x1b[2J", "summary": EVIL, "evidence": ["D1:1", "D1:2"]}],
            "evidence_messages": [{"id": "D1:1", "speaker": "Ana", "text": EVIL, "timestamp": None}],
            "unknowns": ["\u202egone"],
        },
    )
    assert capsys.readouterr().out.splitlines() == [
        "1. seeds\\x1b[2J",
        f"   [D1:1] Ana: {SHOWN}",
        "   [D1:2]",
        "  unknown: \\u202egone",
    ]


def test_evidence_and_phases_are_dated_messages_with_their_authors(capsys):
    print_human(
        "ask",
        {
            "answer": "3 April 2024",
            "unknowns": [],
            "route": "direct",
            "profile": "balanced",
            "stop_reason": "coverage_met",
            "degraded": False,
            "degraded_reason": None,
            "evidence": [
                {
                    "id": "D2:2",
                    "text": "Theo: I went over on my ankle last night",
                    "point": "grade 0.90",
                    "speaker": "Theo",
                    "timestamp": "2024-04-04T12:41:00",
                }
            ],
        },
    )
    assert capsys.readouterr().out.splitlines()[1:4] == [
        "Evidence:",
        "  [D2:2] Thu 4 Apr 2024 12:41  Theo: I went over on my ankle last night",
        "      -> grade 0.90",
    ]
    print_human(
        "arc",
        {
            "unknowns": [],
            "phases": [
                {
                    "name": "4 Apr 2024: I went over on my ankle at football",
                    "summary": "-",
                    "evidence": ["D2:2", "D2:8"],
                }
            ],
            "evidence_messages": [
                {
                    "id": "D2:2",
                    "speaker": "Theo",
                    "text": "I went over on my ankle",
                    "timestamp": "2024-04-04T12:41:00",
                },
                {"id": "D2:8", "speaker": "Mara", "text": "Crutches?", "timestamp": "2024-04-04T12:52:00"},
            ],
        },
    )
    assert capsys.readouterr().out.splitlines() == [
        "1. 4 Apr 2024: I went over on my ankle at football",
        "   [D2:2] Thu 4 Apr 2024 12:41  Theo: I went over on my ankle",
        "   [D2:8] Thu 4 Apr 2024 12:52  Mara: Crutches?",
    ]


def test_chats_and_the_end_of_serve_are_lines_that_say_what_happened(capsys):
    print_human(
        "chats",
        {
            "data": "/d",
            "arcs": None,
            "chats": [
                {
                    "chat": "good",
                    "participants": ["Ana", "Ben"],
                    "messages": 8,
                    "questions": 3,
                    "first": "2024-03-01",
                    "last": "2024-03-09",
                    "built": True,
                    "why_not": None,
                },
                {
                    "chat": "broken",
                    "participants": [],
                    "messages": 0,
                    "questions": 0,
                    "first": None,
                    "last": None,
                    "built": False,
                    "why_not": "cannot be read: broken.json: invalid JSON",
                },
            ],
        },
    )
    assert capsys.readouterr().out.splitlines() == [
        "2 chats in /d (no ARC cases)",
        "chat    participants  messages  questions  dates                     memory",
        "good    Ana, Ben             8          3  2024-03-01 .. 2024-03-09  built",
        "broken  -                    0          0  -                         not built: cannot be read: broken.json: invalid JSON",
    ]
    print_human("serve", {"url": "http://127.0.0.1:8000", "served": ["good"], "not_served": {"broken": "invalid JSON"}})
    assert (
        capsys.readouterr().out
        == "serve: stopped; it served 1 chat files on http://127.0.0.1:8000 (1 not served: broken)\n"
    )


def test_the_chats_columns_line_up_in_a_terminal_when_names_hold_emoji_or_cjk(capsys):
    print_human(
        "chats",
        {
            "data": "/d",
            "arcs": None,
            "chats": [
                {
                    "chat": "whatsapp_family",
                    "name": "Family 🏡💬",
                    "participants": ["Zoë", "山田"],
                    "messages": 12,
                    "questions": 0,
                    "first": "2024-03-01",
                    "last": "2024-03-09",
                    "built": True,
                    "why_not": None,
                },
                {
                    "chat": "slack_general",
                    "name": "general",
                    "participants": ["Ann"],
                    "messages": 3,
                    "questions": 0,
                    "first": "2024-03-02",
                    "last": "2024-03-02",
                    "built": True,
                    "why_not": None,
                },
            ],
        },
    )
    lines = capsys.readouterr().out.splitlines()[1:]
    # each row's "built" column starts at the same terminal column (wcwidth: 🏡, 💬, 山, 田 take two each)
    assert len({wcwidth.wcswidth(line[: line.rindex("built")]) for line in lines[1:]}) == 1, lines
    assert lines[1].startswith("whatsapp_family  Family 🏡💬  Zoë, 山田 ")
    assert lines[2].startswith("slack_general    general      Ann      ")


def test_trace_query_is_escaped(capsys):
    print_human(
        "trace",
        {
            "candidates": [{"id": "D1:1", "score": 0.5}],
            "reranked": [],
            "final": [],
            "route": "direct",
            "gold": {},
            "searches": [{"kind": "question", "query": "tomatoes\r\x1b[1A", "found": ["D1:1"], "selected": []}],
        },
    )
    out = capsys.readouterr().out
    assert '  question   "tomatoes\\x0d\\x1b[1A": found D1:1' in out.splitlines()
    assert "\x1b" not in out and "\r" not in out


def test_key_value_lines_are_escaped(capsys):
    print_human("ingest", {"chat": "evil\x1b[2J", "per_file": {"a\u202eb": {"rows": 3}}})
    assert capsys.readouterr().out.splitlines() == ["ingest: chat=evil\\x1b[2J", "  a\\u202eb: rows=3"]


def test_times_are_printed_in_the_chat_zone_named_once(capsys):
    """Times with their offset (answer_json with the chats' clocks) print as the chat's wall clock,
    and the zone is said once: on the evidence line, the search's count line, above the phases."""
    evidence = {
        "id": "h5db0c79c953bd89c",
        "text": "Maria: I'll drive",
        "point": "grade 0.90",
        "speaker": "Maria",
        "timestamp": "2024-07-13T20:05:00+01:00",
    }
    print_human(
        "ask",
        {
            "answer": "Maria",
            "unknowns": [],
            "route": "direct",
            "profile": "fast",
            "stop_reason": "coverage_met",
            "degraded": False,
            "degraded_reason": None,
            "evidence": [evidence],
            "time_zones": ["Europe/Lisbon"],
        },
    )
    assert capsys.readouterr().out.splitlines()[1:3] == [
        "Evidence (times in Europe/Lisbon):",
        "  [h5db0c79c953bd89c] Sat 13 Jul 2024 20:05  Maria: I'll drive",
    ]
    print_human(
        "search",
        {
            "count": 1,
            "chats": ["c"],
            "time_zones": ["UTC+02:00"],
            "hits": [
                {"chat": "c", "id": "m1", "speaker": "Ana", "text": "hi", "timestamp": "2024-07-13T21:05:00+02:00"}
            ],
        },
    )
    assert capsys.readouterr().out.splitlines() == [
        "1 messages from 1 chats (times in UTC+02:00):",
        "  [c/m1] Sat 13 Jul 2024 21:05  Ana: hi",
    ]
    print_human(
        "arc",
        {
            "unknowns": [],
            "time_zones": ["Europe/Lisbon"],
            "phases": [{"name": "the drive", "summary": "-", "evidence": ["m1"]}],
            "evidence_messages": [
                {"id": "m1", "speaker": "Maria", "text": "I'll drive", "timestamp": "2024-07-13T20:05:00+01:00"}
            ],
        },
    )
    assert capsys.readouterr().out.splitlines() == [
        "(times in Europe/Lisbon)",
        "1. the drive",
        "   [m1] Sat 13 Jul 2024 20:05  Maria: I'll drive",
    ]


def test_a_build_reads_as_chats_and_their_sizes_not_step_names(capsys):
    row = {"messages": 78, "blocks": 18, "threads": 2, "messages_in_blocks": 78}
    print_human(
        "build",
        {
            "data": "/data",
            "chat_files": 4,
            "built": 3,
            "messages": 156,
            "blocks": 36,
            "threads": 4,
            "per_file": {
                "discord_10k": {
                    **row,
                    "ran": ["messages", "split"],
                    "encoded_messages": 78,
                    "seconds": {"encode": 2.5, "other": 0.5},
                },
                "slack_social": {
                    **row,
                    "ran": ["l1_topics"],
                    "encoded_messages": 1,
                    "seconds": {"encode": 0.1, "other": 0.2},
                },
                "signal_x": {**row, "ran": [], "encoded_messages": 0, "seconds": {"encode": 0.0, "other": 0.0}},
                "telegram_y": {
                    **row,
                    "ran": ["messages"],
                    "encoded_messages": 0,
                    "seconds": {"encode": 0.0, "other": 0.4},
                },
            },
            "not_built": {"whatsapp_z": f"_chat.txt: line 3: {EVIL}"},
        },
    )
    assert capsys.readouterr().out.splitlines() == [
        "3 of 4 chats ready in /data: 156 messages, 36 topic blocks, 4 threads",
        "  discord_10k: 78 messages, 18 topic blocks, 2 threads; built in 3.0 s, 78 messages encoded",
        "  slack_social: 78 messages, 18 topic blocks, 2 threads; built in 0.3 s, 1 message encoded",
        "  signal_x: 78 messages, 18 topic blocks, 2 threads; up to date",
        "  telegram_y: 78 messages, 18 topic blocks, 2 threads; built in 0.4 s, nothing to encode",
        f"  whatsapp_z: NOT BUILT: _chat.txt: line 3: {SHOWN}",
    ]


def test_evidence_shows_who_reacted(capsys):
    reactions = [
        {"emoji": "👍", "people": ["Sam", "Dee"], "count": 2},
        {"emoji": "❤", "people": ["Sam"], "count": 5},
        {"emoji": ":pog:", "people": [], "count": 4},
        {"emoji": "🎉", "people": [EVIL], "count": 1},
    ]
    print_human(
        "ask",
        {
            "answer": "Sam",
            "evidence": [{"id": "7", "text": "Priti: Rota done", "point": "grade 0.90", "reactions": reactions}],
            "unknowns": [],
            "route": "direct",
            "profile": "fast",
            "stop_reason": "coverage_met",
            "degraded": False,
        },
    )
    assert capsys.readouterr().out.splitlines()[2:4] == [
        "  [7] Priti: Rota done",
        f"      reactions: 👍 Sam, Dee  ❤ Sam and 4 more  :pog: 4  🎉 {SHOWN}",
    ]
