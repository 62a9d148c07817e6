"""terminal_safe: every class of control and bidi character becomes a visible escape."""

from __future__ import annotations

import pytest

from narrative_mirror.safe_text import terminal_safe


@pytest.mark.parametrize(
    "text, shown",
    [
        ("plain text, émojis 😅 and 日本語", "plain text, émojis 😅 and 日本語"),
        ("tab\tstays", "tab\tstays"),
        ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),  # OSC title change ended by BEL
        ("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"),  # clear screen, cursor home
        ("ok\rfake", "ok\\x0dfake"),  # carriage-return overwrite
        ("\x00\x08\x0b\x0c\x1f", "\\x00\\x08\\x0b\\x0c\\x1f"),
        ("del\x7f", "del\\x7f"),
        ("\x80\x85\x9b31m\x9f", "\\x80\\x85\\x9b31m\\x9f"),  # C1, CSI included
        ("\u202a\u202b\u202c\u202d\u202e", "\\u202a\\u202b\\u202c\\u202d\\u202e"),
        ("\u2066\u2067\u2068\u2069", "\\u2066\\u2067\\u2068\\u2069"),
        ("\u200e\u200f\u061c", "\\u200e\\u200f\\u061c"),
        ("line\u2028para\u2029", "line\\u2028para\\u2029"),
        ("two\nlines", "two\\nlines"),
        ("\u200bzero width stays", "\u200bzero width stays"),  # invisible but moves nothing
        (42, "42"),
    ],
)
def test_terminal_safe_escapes_each_class(text, shown):
    assert terminal_safe(text) == shown


def test_newlines_stay_only_when_asked():
    assert terminal_safe("a\nb\x1b", keep_newlines=True) == "a\nb\\x1b"


def test_escaping_twice_changes_nothing():
    once = terminal_safe("\x1b[31m\u202e\n")
    assert terminal_safe(once) == once
