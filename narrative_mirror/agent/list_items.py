"""The quoted titles a question asking for shows, films or books is answered with ("What tv shows
did Emi watch?" -> "Friends, The Office" of 'I loved "Friends" and "The Office"'), checked word by
word against their message.
"""

from __future__ import annotations

import re

# Things a chat names by a title in quotes.
TITLED = set(
    "show shows tv series sitcom sitcoms episode episodes movie movies film films book books novel novels "
    "song songs album albums podcast podcasts".split()
)
_ASKED = re.compile(r"\b(?:what|which)\s+(?:(?:kinds?|types?|sorts?)\s+of\s+)?(?P<words>(?:[a-z][\w-]*\s+){0,3})", re.I)
_QUOTED = re.compile(
    r"[\"“](?P<title>[^\"“”\n]{2,60}?)[\"”](?:,?\s+by\s+(?P<author>[A-Z][\w.'’-]*(?:\s+[A-Z][\w.'’-]*){0,3}))?"
)
_WORD = re.compile(r"[\w'’-]+")


def asks_for_titles(question: str) -> bool:
    """Whether the question asks for things a chat names in quotes ("What movies or tv shows did
    Paola recommend?", "Which books does Paola like?"), not what they are about ("What genres ...")."""
    found = _ASKED.search(question)
    return bool(found and TITLED & {w.lower() for w in found.group("words").split()})


def titles(text: str) -> list[str]:
    """The titles ``text`` writes in quotes, in order, each once, with the author named after
    one: 'I loved "Friends" and "Becoming" by Michelle Obama' -> ["Friends", "Becoming by
    Michelle Obama"]; a quote that is a sentence (ends with . ! ?) is no title."""
    found: list[str] = []
    for match in _QUOTED.finditer(text):
        title = match.group("title").strip(" ,")
        if not title or re.search(r"[.!?]$", title) or title.lower() in (f.split(" by ")[0].lower() for f in found):
            continue
        found.append(f"{title} by {_author(match.group('author'))}" if match.group("author") else title)
    return found


def _author(words: str) -> str:
    """The author's name up to the end of its sentence: "V.E. Schwab. And" -> "V.E. Schwab"."""
    kept: list[str] = []
    for word in words.split():
        if word.endswith(".") and not re.fullmatch(r"(?:[A-Z]\.)+", word):  # a full stop, not an initial
            kept.append(word.rstrip("."))
            break
        kept.append(word)
    return " ".join(kept)


def words_in_order(claim: str, text: str) -> bool:
    """Whether every word of ``claim`` is a word of ``text``, in the same order (a title with the
    author named after it is checked against its message this way)."""
    written = [w.lower() for w in _WORD.findall(text)]
    at = 0
    for word in (w.lower() for w in _WORD.findall(claim)):
        try:
            at = written.index(word, at) + 1
        except ValueError:
            return False
    return bool(claim.strip())
