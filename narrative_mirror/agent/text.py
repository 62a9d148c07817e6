"""Word-level helpers of the agent: light stemming, term matching, time phrases, injection cues."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from narrative_mirror.layers.text import content_tokens, tokens

MONTHS = (
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
).split()
# "may" alone is usually the verb: it counts as a month only next to a day number or a year.
_BARE_MONTHS = [m for m in MONTHS if m != "may"]
WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday weekend weekends".split()

# Time phrases of a question, longest alternatives first so "new year's eve" wins over "new year".
_TIME_PHRASE = re.compile(
    r"\b(?:(?:in|on|during|after|before|since|until|by|around|at)\s+)?(?:the\s+)?(?:"
    r"(?:first|second|third|last|next|this|past|previous|early|late|mid)\s+(?:week|month|year|weekend|days?)"
    r"(?:\s+of\s+(?:\d{4}|" + "|".join(MONTHS) + r"))?"
    r"|new\s+year'?s?(?:\s+eve)?(?:\s+\d{4})?|christmas(?:\s+eve)?|thanksgiving|easter|valentine'?s?(?:\s+day)?"
    r"|\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:" + "|".join(MONTHS) + r")(?:,?\s+\d{4})?"
    r"|may(?:\s+\d{1,2}(?:st|nd|rd|th)?(?:,?\s+\d{4})?|,?\s+\d{4})"
    r"|(?:" + "|".join(_BARE_MONTHS) + r")(?:\s+\d{1,2}(?:st|nd|rd|th)?)?(?:,?\s+\d{4})?"
    r"|(?:" + "|".join(WEEKDAYS) + r")"
    r"|yesterday|today|tonight|tomorrow|spring|summer|autumn|winter"
    r"|(?:19|20)\d{2}"
    r")\b",
    re.IGNORECASE,
)

# Text that addresses an AI model rather than the other chat participant. Such messages stay
# searchable data, but their wording never becomes the agent's answer. The patterns run on the
# normalized text of ``injection_text`` (folded letters, no punctuation inside words, single
# spaces); words may also be run together ("ignorepreviousinstructions"), hence the ``\s?``.
_PREVIOUS = r"(?:previous|prior|above|earlier|preceding|former|original|initial|foregoing)"
_ORDERS = r"(?:instructions?|rules?|prompts?|directions?|directives?|guidelines?|commands?|constraints?)"
_AI = r"(?:ai|llm|llms|language\s?models?|chatbots?|ai\s?assistants?)"
_INJECTION = re.compile(
    r"\b(?:ignore|disregard|forget|override|overwrite|bypass)\s?(?:(?:all|any|of|the|your|these|those|every|my)\s?)*"
    r"(?:"
    + _PREVIOUS
    + r"\s?"
    + _ORDERS
    + r"|(?:your|the\s?system)\s?(?:"
    + _ORDERS
    + r"|programming|system\s?prompt))"
    r"|\b(?:ignore|disregard|forget)\s?(?:all\s?)?(?:everything|anything)\s?(?:above|before|previously|you\s?were\s?told)"
    r"|\bsystem\s?prompt\b|\b(?:dan|jailbreak|god)\s?mode\b|\byou\s?are\s?in\s?developer\s?mode\b"
    r"|\byou\s?are\s?(?:now|no\s?longer)\s?(?:(?:a|an|the|in|my)\s?)?(?:\w+\s){0,2}?"
    r"(?:ai|assistant|bot|chatbot|language\s?model|dan|gpt|jailbroken|unfiltered|unrestricted|developer\s?mode)\b"
    r"|\b(?:new|updated|real|actual|true)\s?(?:instructions?|directives?)\s?:"
    r"|\byour\s?(?:new|updated|real|actual|true)\s?(?:instructions?|orders|directives?)\b"
    r"|\bfinal\s?answer\s?(?::|=|is\s?:)"
    r"|\b(?:respond|reply|answer|output|print|return)\s?(?:only|solely|exclusively)\s?(?:with|in|using|the\s?word)\b"
    r"|\bonly\s?(?:respond|reply|answer|output)\s?with\b"
    r"|\b(?:call|invoke)\s?(?:the\s?)?tool\b|\btool\s?call"
    r"|\bas\s?an?\s?(?:ai|language\s?model|llm|chatbot|ai\s?assistant)\b"
    r"|\b(?:to|attention|dear|note\s?to)\s?(?:any|the|all)?\s?"
    + _AI
    + r"\s?(?:reading|that\s?reads|processing|summari[sz]ing|:)"
    r"|\bif\s?you\s?are\s?an?\s?" + _AI + r"\b"
)
# Chat-template and role markers, and a message addressing the model by name ("assistant, ignore
# ..."), matched on the folded text before punctuation is dropped.
_ROLE_MARKER = re.compile(
    r"<\|?\s*(?:im_start|im_end|endoftext|system|assistant)\s*\|?>|\[/?(?:inst|system)\]|#{2,}\s*(?:system|instruction)"
    r"|\b(?:assistant|ai|llm|chatbot|gpt|chatgpt|model)\s*[:,]\s*(?:ignore|answer|respond|say|output|reply|print|tell)\b"
    r"|\b(?:hey|dear|attention|note\s+to)\s+(?:the\s+)?" + _AI + r"\s*[:,]"
)
# Latin look-alikes from Cyrillic and Greek (lower case: the text is case-folded first).
_CONFUSABLES = str.maketrans(
    {
        "а": "a",
        "в": "b",
        "е": "e",
        "ё": "e",
        "к": "k",
        "м": "m",
        "н": "h",
        "о": "o",
        "р": "p",
        "с": "c",
        "т": "t",
        "у": "y",
        "х": "x",
        "і": "i",
        "ї": "i",
        "ј": "j",
        "ѕ": "s",
        "ԁ": "d",
        "ԛ": "q",
        "ԝ": "w",
        "һ": "h",
        "ӏ": "l",
        "ɡ": "g",
        "ı": "i",
        "ℓ": "l",
        "α": "a",
        "β": "b",
        "ε": "e",
        "η": "n",
        "ι": "i",
        "κ": "k",
        "ν": "v",
        "ο": "o",
        "ρ": "p",
        "τ": "t",
        "υ": "u",
        "χ": "x",
        "γ": "y",
        "ω": "w",
        "ς": "s",
        "σ": "o",
    }
)
# Punctuation between two letters ("i.g.n.o.r.e", "in-structions"), single letters spaced out
# ("i g n o r e"), and anything not a letter, digit, colon or equals sign.
_INNER_PUNCT = re.compile(r"(?<=\w)[^\w\s:=]+(?=\w)")
_SPACED_LETTERS = re.compile(r"\b(?:\w )+\w\b")
_OTHER = re.compile(r"[^\w:=]+")


def stem(token: str) -> str:
    """A crude suffix-stripping stem: enough to match "remedies"/"remedy", "hiking"/"hike"."""
    if token.endswith("'s"):
        token = token[:-2]
    if len(token) > 4 and token.endswith("ies"):
        return token[:-3] + "y"
    plural = token.endswith("s")
    if len(token) - plural > 6 and token.endswith(("tion", "sion", "tions", "sions")):  # "operation(s)" / "operated"
        return token[: -4 if plural else -3]
    for suffix in ("ing", "ed", "es", "s", "e", "d"):
        if token.endswith(suffix) and len(token) - len(suffix) >= 3 and not token.endswith("ss"):
            return token[: -len(suffix)]
    return token


def stems(text: str, exclude: Iterable[str] = ()) -> set[str]:
    """Stems of the content words of ``text``."""
    return {stem(t) for t in content_tokens(text, exclude)}


def written_words(text: str, wanted: Iterable[str]) -> list[str]:
    """The words of ``text`` whose stems are ``wanted``, as written (lower case), each stem once,
    in the order they appear: "mentions ankle", not the stem "ankl"."""
    wanted, out = set(wanted), {}
    for token in tokens(text):
        if stem(token) in wanted and stem(token) not in out:
            out[stem(token)] = token
    return list(out.values())


def names_in(names: Iterable[str], speaker: str, text: str) -> list[str]:
    """The ``names`` that are the message's speaker or appear in its text as a word."""
    lowered = text.lower()
    return [
        n for n in names if n.lower() == speaker.lower() or re.search(rf"(?<!\w){re.escape(n.lower())}(?!\w)", lowered)
    ]


def time_phrases(text: str) -> list[str]:
    """Time expressions as written, in order ("in the first week of 2024", "on Friday")."""
    return [m.group(0).strip() for m in _TIME_PHRASE.finditer(text)]


def time_words(text: str) -> set[str]:
    """Lower-case words that belong to time expressions of ``text``."""
    return {w for phrase in time_phrases(text) for w in tokens(phrase)}


def _folded(text: str) -> str:
    """NFKC, case-folded, accents and format characters (zero-width, soft hyphen, bidi) dropped,
    Cyrillic and Greek look-alikes as Latin letters."""
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold())
    text = "".join(c for c in text if unicodedata.category(c) not in ("Mn", "Cf"))
    return unicodedata.normalize("NFKC", text).translate(_CONFUSABLES)


def folded(text: str) -> str:
    """The text as the injection checks read it (``_folded``): case, accents, format characters
    and look-alike letters removed."""
    return _folded(text)


def injection_text(text: str) -> str:
    """The form the injection patterns read: folded, punctuation inside words removed, spaced-out
    letters joined, every other run of non-word characters one space (colons kept)."""
    text = _INNER_PUNCT.sub("", _folded(text))
    text = _SPACED_LETTERS.sub(lambda m: m.group(0).replace(" ", ""), " ".join(text.split()))
    text = _OTHER.sub(" ", text).replace("_", " ")
    return re.sub(r"\s*([:=])\s*", r" \1 ", text).strip()


def looks_like_injection(text: str) -> bool:
    """True when the text speaks to an AI model (instructions, role changes, answer formats,
    tool calls), however it is spelled: case, accents, look-alike letters, zero-width
    characters, letters spaced out or joined, singular or plural."""
    return bool(_ROLE_MARKER.search(_folded(text)) or _INJECTION.search(injection_text(text)))
