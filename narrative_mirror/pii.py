"""Personal data a search result may carry (the memory-API design's PII_STRICT): e-mail addresses, phone
numbers and card-like numbers (13-19 digits passing the Luhn check).

Look-alikes are not flagged: dates ("2024-03-01", "01/03/2024"), times, amounts ("1,250.00"),
order numbers and IBAN-like codes (letters inside the run), version strings ("1.2.3"), and a
digit run failing the Luhn check. A phone number needs 9-15 digits in groups (spaces, dashes,
dots or parentheses between them) and a leading "+" or "0", an area code in parentheses or at
least three groups.
"""

from __future__ import annotations

import re

KINDS = ("email", "phone", "card")
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
# 13-19 digits, optionally grouped by single spaces or dashes, not inside a longer alphanumeric run
_CARD = re.compile(r"(?<![\w.,/-])\d(?:[ -]?\d){12,18}(?![\w.,/-]\d)(?!\w)")
_PHONE = re.compile(
    r"(?<![\w.,/+-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,5}\)[ .-]?)?\d{1,5}(?:[ .-]\d{2,8}){1,4}(?![\w.,/-]?\d)"
)
_IBAN_HEAD = re.compile(r"[A-Z]{2}\d{2} ?$")  # "DE89 3704 ...": the digits of an account code
_DATE_LIKE = re.compile(r"^(?:\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{2,4})$")


def luhn_valid(digits: str) -> bool:
    total = 0
    for n, char in enumerate(reversed(digits)):
        d = int(char)
        if n % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _cards(text: str) -> list[str]:
    found = []
    for match in _CARD.finditer(text):
        digits = re.sub(r"\D", "", match.group())
        if 13 <= len(digits) <= 19 and luhn_valid(digits) and not _IBAN_HEAD.search(text[: match.start()]):
            found.append(match.group())
    return found


def _phones(text: str, cards: list[str]) -> list[str]:
    found = []
    for match in _PHONE.finditer(text):
        span = match.group()
        digits = re.sub(r"\D", "", span)
        # a "+", an area code in parentheses, several groups, or a trunk "0" before one group
        grouped = span.startswith(("+", "0")) or "(" in span or len(re.findall(r"[ .-]", span)) >= 2
        if (
            9 <= len(digits) <= 15
            and grouped
            and span not in cards
            and not _DATE_LIKE.match(span)
            and "." not in span.replace(" ", "")[:1]
        ):
            found.append(span)
    return found


def pii_kinds(text: str) -> list[str]:
    """The kinds of personal data ``text`` carries, in ``KINDS`` order (empty: none)."""
    cards = _cards(text)
    found = {"email": bool(_EMAIL.search(text)), "card": bool(cards), "phone": bool(_phones(text, cards))}
    return [kind for kind in KINDS if found[kind]]


def quarantine_marker(kinds: list[str]) -> str:
    """What a quarantined text reads as: the kinds it carried, never the values."""
    return f"[quarantined: {', '.join(kinds)}]"
