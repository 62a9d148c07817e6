"""Terminal-safe text: chat-derived strings shown as visible escapes, never as control codes.

A chat message, a question or a chat file name can carry C0/C1 control characters (ESC
sequences that retitle or clear a terminal, a carriage return that overwrites a line) and
bidirectional-override marks (U+202E shows text reversed). ``terminal_safe`` replaces each with
a visible escape (``\\x1b``, ``\\u202e``) so hostile text stays text wherever it is printed.
"""

from __future__ import annotations

import re

# Bidirectional controls (embeddings, overrides, isolates, marks) and the Unicode line and
# paragraph separators, which some terminals and viewers treat as line breaks.
_BIDI_AND_SEPARATORS = "\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\u2028\u2029"
# C0 controls except tab and newline, DEL, C1 controls.
_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f"
_UNSAFE = re.compile(f"[{_CONTROLS}{_BIDI_AND_SEPARATORS}\n]")
_UNSAFE_KEEP_NEWLINES = re.compile(f"[{_CONTROLS}{_BIDI_AND_SEPARATORS}]")


def _escape(match: re.Match) -> str:
    code = ord(match.group(0))
    if code == 0x0A:
        return "\\n"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def terminal_safe(text: object, keep_newlines: bool = False) -> str:
    """``text`` (any value, as ``str``) with every control and bidi character as a visible escape.

    Tabs stay; newlines stay only with ``keep_newlines`` (a multi-line block the caller built),
    so a message cannot start a line of its own that looks like the program's output.
    """
    pattern = _UNSAFE_KEEP_NEWLINES if keep_newlines else _UNSAFE
    return pattern.sub(_escape, str(text))


MAX_LINE_CHARS = 2000  # longest error or warning line printed or answered; the rest is counted, not shown


def clip_line(text: object, limit: int = MAX_LINE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was (a 2 MB message quoted in an
    error must not become a 2 MB line of a terminal, a log or a response)."""
    text = str(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [cut: {len(text):,} characters in all]"
