"""Typed values in chat messages: clock times, amounts (not counts of things, times, dates,
versions or ids), the days of a plan ("Thursday at 2pm", "Saturday 21st to Monday 23rd") and
negation."""

from __future__ import annotations

import re

from narrative_mirror.agent.text import MONTHS

TIME = re.compile(
    r"\b(?:(?P<h>\d{1,2})(?::(?P<m>\d{2}))?\s*(?P<ampm>am|pm|a\.m\.|p\.m\.)"
    r"|(?P<hm>\d{1,2}:\d{2})|(?<=\bat )(?P<bare>\d{1,2})(?![\d:.,]|\s*(?:%|each|people|of|th|st|nd|rd)))",
    re.I,
)
# "1,500" groups thousands; "143,50" (two digits after the comma) is a decimal comma, as euro
# amounts are written on the continent.
NUMBER = re.compile(
    r"(?<![\w#.,/:-])[£$€]?\s?(\d{1,3}(?:,\d{3})+|\d+,\d{2}(?!\d)|\d+(?:\.\d+)?)(?![\w/]|[.,]\d|:\d|-\d)"
)
_DECIMAL_COMMA = re.compile(r"\d+,\d{2}")
_EURO_AFTER = re.compile(r"^\s*(?:€|(?:euros?|eur)\b)", re.I)
MONEY_AFTER = re.compile(
    r"^\s*(?:€|quid|euros?|eur|pounds?|dollars?|bucks|gbp|usd|each|total|a head|per\b|pp\b|left|for|"
    r"a (?:night|month)\b)",
    re.I,
)
# a share per person, after a price per night or month or not ("22 a night each")
EACH_AFTER = re.compile(
    r"^\s*(?:quid\s+|euros?\s+|pounds?\s+|dollars?\s+)?(?:a (?:night|month)\s+)?"
    r"(?:each|a head|per (?:person|head|player)|pp)\b",
    re.I,
)
COUNT_OF_PEOPLE = re.compile(
    r"\b(?:split|divided)\s+(\d+|two|three|four|five|six|seven|eight|nine|ten)\s+ways\b|"
    r"\b(\d+|two|three|four|five|six|seven|eight|nine|ten)\s+of\s+us\b",
    re.I,
)
NUMBER_WORDS = {w: n for n, w in enumerate("zero one two three four five six seven eight nine ten".split())}


_A_MONTH = re.compile(r"^\s*(?:of\s+)?(?:" + "|".join(MONTHS) + r")\b", re.I)  # "21 April": a day


def times_in(text: str) -> list[re.Match]:
    return list(TIME.finditer(text))


def amounts(text: str) -> list[tuple[float, str, str]]:
    """(value, as written, what follows) of each number that is an amount: no time, date,
    version, score, id or count of things ("14 pizzas")."""
    out = []
    for m in NUMBER.finditer(text):
        after, before = text[m.end() :], text[: m.start()]
        if (
            re.match(r"^\s*(?:am|pm|st|nd|rd|th|%|x\b)", after, re.I)
            or _A_MONTH.match(after)
            or re.search(r"\b(?:at|v|pr|#)\s*$", before, re.I)
        ):
            continue
        if re.match(
            r"^\s*(?:of us|ways|people|games?|tests?|failures?|fields?|slices?|pizzas?|goals?|nights?|"
            r"weeks?|days?|hours?|minutes?|months?|years?|min|mins|merchant|accounts?)\b",
            after,
            re.I,
        ):
            continue
        priced = m.group(0)[0] in "£$€"  # "£150 deposit", "£850 of the £950": an amount by its symbol
        if _DECIMAL_COMMA.fullmatch(m.group(1)):
            if not (priced or _EURO_AFTER.match(after)):
                continue  # "pitches 5,10": a list, not an amount
            value = float(m.group(1).replace(",", "."))
        else:
            value = float(m.group(1).replace(",", ""))
        if 1900 <= value <= 2100 and "." not in m.group(1) and not priced:
            continue
        if re.match(r"^\s*[a-z]", after) and not MONEY_AFTER.match(after) and not priced:
            continue
        out.append((value, m.group(0).strip(), after))
    return out


MONTH_WORD = "|".join(m for m in MONTHS if m != "may") + "|may(?=\\s+\\d)"
_DAY_NUMBER = rf"\s+(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)?(?:\s+(?:of\s+)?(?:{MONTH_WORD}))?"
PLAN_DAY = (
    rf"(?:(?:mon|tues|wednes|thurs|fri|satur|sun)day(?:{_DAY_NUMBER})?"
    # a short weekday only with its day ("Fri 28th", "Sat 29 Mar"): "sat", "sun", "wed" are words too
    rf"|(?:mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)\.?\s+(?:the\s+)?\d{{1,2}}"
    rf"(?:(?:st|nd|rd|th)(?:\s+(?:of\s+)?(?:{MONTH_WORD}))?|\s+(?:of\s+)?(?:{MONTH_WORD}))\b"
    rf"|(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{MONTH_WORD})\b)"
)
PLAN = re.compile(
    rf"\b{PLAN_DAY}(?:\s+(?:to|until|-)\s+{PLAN_DAY})?"
    rf"(?:,?\s+(?:at|from)?\s*(?:\d{{1,2}}(?::\d{{2}})?\s*(?:am|pm)|\d{{1,2}}:\d{{2}}|(?<=at )\d{{1,2}}\b))?",
    re.I,
)

# A value said not to hold: "9:15 not 9:45", "instead of Friday", "~~Sat 29 Mar~~" (struck through)
_REJECTED_BEFORE = re.compile(r"(?:\bnot|\binstead of|\brather than|\bno longer|~~?)\s*(?:the\s+|at\s+|on\s+)?$", re.I)


def kept(found: list[re.Match], text: str) -> list[re.Match]:
    """The values of ``found`` (matches in ``text``) that the text does not reject; all of them
    when it rejects every one."""
    return [m for m in found if not _REJECTED_BEFORE.search(text[: m.start()])] or found


# A thing refused or ruled out is a "no" (slots.py's yes/no reads them too)
RULED_OUT = r"exclude[sd]?|banned|forbidden|refused|prohibited"
NEGATIVE = re.compile(
    r"\b(?:not|no|never|can't|cannot|won't|couldn't|didn't|isn't|wasn't|miss|skip|cancel(?:led)?|unable)\b|n't\b"
    # refused or ruled out: "microwaves are still excluded"
    rf"|\b(?:{RULED_OUT}|ruled out)\b"
    # withdrawing: "I'm out" (not "I'm out of milk"), "pulled out (of the trip)"
    r"|\b(?:I'?m|I am|count me)\s+out\b(?!\s+of\b)|\b(?:drop(?:ped|ping|s)?|pull(?:ed|ing|s)?)\s+out\b",
    re.I,
)
