"""Seed 004's PII_STRICT detector over a corpus of personal data and look-alikes."""

from __future__ import annotations

import pytest

from narrative_mirror.pii import luhn_valid, pii_kinds, quarantine_marker

POSITIVES = [
    ("mail me at ana.lopez+bakery@example.co.uk tonight", ["email"]),
    ("BEN@BAKERY.IO wrote back", ["email"]),
    ("call +1 415 555 0132 after six", ["phone"]),
    ("my number is (030) 1234 5678", ["phone"]),
    ("ring 020-7946-0958 tomorrow", ["phone"]),
    ("phone: 0176 12345678", ["phone"]),
    ("+49.30.901820 is the office", ["phone"]),
    ("card 4111 1111 1111 1111 exp 12/27", ["card"]),
    ("it's 5500-0000-0000-0004", ["card"]),
    ("pay with 378282246310005", ["card"]),
    ("6011111111111117, or ana@example.org, or +33 1 42 68 53 00", ["email", "phone", "card"]),
]
LOOK_ALIKES = [
    "we met on 2024-03-01 at 14:30",
    "see you 01/03/2024 or 1.3.2024",
    "it cost 1,250.00 EUR, or $12,499.99",
    "order #1234567890123 shipped",
    "order number 4111111111111112",  # 16 digits failing the Luhn check
    "IBAN DE89 3704 0044 0532 0130 00",
    "IBAN GB82 4111 1111 1111 1111",  # Luhn-valid digits inside an account code
    "upgrade to version 1.2.3 or 10.15.7",
    "the score was 3-2, then 21-19",
    "I ran 42.195 km in 3:45:12",
    "flight LH 2024 at 10.30",
    "ISBN 978-3-16-148410-0",
    "between 1999 and 2004",
    "tracking 1Z999AA10123456784",
    "email me later, at the bakery @ 5",
    "room 12, floor 3, 2 guests",
]


@pytest.mark.parametrize(("text", "kinds"), POSITIVES)
def test_personal_data_is_found_by_kind(text, kinds):
    assert pii_kinds(text) == kinds


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_look_alikes_are_not_personal_data(text):
    assert pii_kinds(text) == []


def test_luhn_and_the_marker():
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert quarantine_marker(["email", "card"]) == "[quarantined: email, card]"
