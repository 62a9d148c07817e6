"""Who and what a question names: persons (names, aliases, typos), the chat's aliases, entities."""

import random
import re
import time

import pytest

from narrative_mirror.retrieval import query_names
from narrative_mirror.retrieval.query_names import EntityMatcher, entities, persons, speaker_aliases, without_persons
from narrative_mirror.retrieval.query_understanding import parse_query

SPEAKERS = ["Emi", "elise"]
ALIASES = {"Kate": "Emi"}


def test_without_persons_removes_names_aliases_and_possessives():
    assert without_persons("Is Elise vegan?", SPEAKERS, ALIASES) == "Is vegan?"
    assert without_persons("What are Kate's hobbies, and Elise’s?", SPEAKERS, ALIASES) == "What are hobbies, and ?"
    assert without_persons("Where do they ski?", SPEAKERS, ALIASES) == "Where do they ski?"
    assert without_persons("Did Emily call?", SPEAKERS, ALIASES) == "Did Emily call?"


def test_persons_tolerate_one_typo_in_names_of_five_letters_or_more():
    speakers = ["Nicolas", "Nebraas"]
    assert persons("What symptoms does Nikolas have?", speakers) == ["Nicolas"]  # substitution
    assert persons("Is Nerbaas loyal?", speakers) == ["Nebraas"]  # swapped neighbours
    assert persons("Did Nicola call Nebras?", speakers) == ["Nicolas", "Nebraas"]  # missing letters
    assert without_persons("Is Nerbaas's dog ok?", speakers) == "Is dog ok?"
    # Two edits, or a short name, is another word: "Mona Lisa" does not name "Liza".
    assert persons("Did Nikolaas call?", speakers) == []
    assert persons("Did she see the Mona Lisa?", ["Emi", "Paola"], {"Liza": "Paola"}) == []
    # Exact names still win: "Elise" is not read as a typo of "Elisa".
    assert persons("Did Elise meet Elisa?", ["Elise", "Elisa"]) == ["Elise", "Elisa"]


def test_speaker_aliases_from_introductions_and_vocatives():
    messages = [
        ("Emi", "Hi! I'm Kate. What's your name?"),
        ("elise", "Kate! Nice to meet you"),
        ("elise", "Oh! Good to know"),  # an interjection, not a name
        ("Emi", "Wow! so cool, Liza!"),  # one vote only
        ("Emi", "wow, thanks"),
    ]
    assert speaker_aliases(messages) == {"Kate": "Emi"}
    assert speaker_aliases(messages, min_votes=1) == {"Kate": "Emi", "Liza": "elise"}


# -- entities: one matcher per chat, the same answers as one regex per known entity ----------------
def per_name_entities(query, known, exclude=()):
    """The matching as it was: one compiled regex per known entity and question, longest first."""
    skip = {e.lower() for e in exclude}
    taken = [False] * len(query)
    out = []
    for entity in sorted({e.lower() for e in known if e and len(e) > 2} - skip, key=lambda e: (-len(e), e)):
        pattern = re.compile(r"(?<![\w-])" + re.escape(entity) + r"(?:'s|’s)?(?![\w-])", re.I)
        for m in pattern.finditer(query):
            if not any(taken[m.start() : m.end()]):
                taken[m.start() : m.end()] = [True] * (m.end() - m.start())
                out.append(entity)
                break
    return out


KNOWN = [
    "new",
    "New York",
    "new york city",
    "york city",
    "york",
    "c++",
    "a.b",
    "(x)",
    "what?",
    "$5 deal",
    "[tag]",
    "dr. who",
    "1+1",
    "art basel",
    "basel",
    "x-ray",
    "ski",
    "kate",
    "emi",
    "ab",
    "Colorado",
    "kelvin",
    "istanbul",
    "straße",
    "café",
    "caf",
]


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        # prefixes of each other: the longest that fits takes the words, a shorter one only free words
        ("Did they visit New York City or York?", ["new york city", "york"]),
        ("new york city", ["new york city"]),
        ("NEW YORK, then york city.", ["york city", "new york"]),
        # regex metacharacters are literal
        ("Is C++ harder than c+?", ["c++"]),
        ("Who bought the $5 deal at Dr. Who's shop?", ["$5 deal", "dr. who"]),
        ("Was 1+1 on the [TAG] list, or (x) or a.b or aXb?", ["[tag]", "(x)", "1+1", "a.b"]),
        ("What? what? is what?", ["what?"]),
        # possessives count, hyphenated words do not end a name; "emi" is a speaker (excluded)
        ("Did Kate's x-ray show anything at the ski-trip?", ["x-ray", "kate"]),
        ("Art Basel’s fair in Basel, and basel again", ["art basel", "basel"]),
        ("Did Emi ski in Colorado?", ["colorado", "ski"]),
        # case as re.IGNORECASE compares it: the Kelvin sign is a K, a dotted capital I an i
        ("The \u212aelvin scale in \u0130stanbul", ["istanbul", "kelvin"]),
        ("STRASSE or Straße or Café or caf or CAFÉ", ["straße", "café", "caf"]),
        ("Nothing known here, not even an ab", []),
    ],
)
def test_entity_matcher_finds_what_per_name_matching_found(question, expected):
    assert per_name_entities(question, KNOWN, exclude=["Emi"]) == expected
    assert entities(question, KNOWN, exclude=["Emi"]) == expected
    assert EntityMatcher(KNOWN, exclude=["EMI"]).find(question) == expected


def test_entity_matcher_equals_per_name_matching_on_random_vocabularies():
    rng = random.Random(7)
    pieces = [
        "a",
        "b",
        "ab",
        "ba",
        "aa",
        " ",
        "-",
        "'s",
        "’s",
        "'",
        ".",
        "+",
        "(",
        "K",
        "k",
        "\u212a",
        "I",
        "i",
        "\u0130",
        "\u0131",
        "s",
        "S",
        "\u017f",
        "é",
        "É",
    ]

    def word():
        return "".join(rng.choice(pieces) for _ in range(rng.randint(1, 5)))

    found = 0
    for _ in range(600):
        known = list({word() for _ in range(rng.randint(1, 20))})
        exclude = [rng.choice(known)] if rng.random() < 0.3 else []
        matcher = EntityMatcher(known, exclude)
        for _ in range(8):
            question = "".join(rng.choice(known + pieces) for _ in range(rng.randint(0, 12)))
            expected = per_name_entities(question, known, exclude)
            assert matcher.find(question) == expected, (question, known, exclude)
            found += bool(expected)
    assert found > 300  # the cases do match things


def test_entity_matcher_is_built_once_and_fast_on_a_large_vocabulary():
    known = [f"place{i} {'east' if i % 3 else 'west'}" for i in range(900)] + [f"place{i}" for i in range(900)]
    matcher = EntityMatcher(known)
    question = "Did they go from place17 east to Place897 West's market, or to place4?"
    expected = ["place897 west", "place17 east", "place4"]
    started = time.perf_counter()
    for _ in range(20):
        assert matcher.find(question) == expected
    one_matcher = (time.perf_counter() - started) / 20
    started = time.perf_counter()
    assert per_name_entities(question, known) == expected  # 1,800 regexes, past re's cache of 512
    per_name = time.perf_counter() - started
    assert one_matcher * 20 < per_name  # measured: ~0.02 ms against ~300 ms
    # parse_query reads entities through the chat's matcher when given one
    assert parse_query(question, speakers=["Ann"], entity_matcher=matcher).entities == expected


def test_introduction_prefilter_and_lower_case_search_match_the_regexes():
    texts = [
        "Hi, I'm Kate.",
        "I\u2019M Kate!",
        "my NAME is Ann",
        "\u0130'm Ali.",
        "this\nis Bo.",
        "call\tme Al",
        "nothing",
        "",
        "hello\nI am Zed",
        "\u0131 am Cy",
        "thi\u017f is Di",
        "I'm\nKate.",
    ]
    phrase = re.compile(query_names._INTRODUCTION)
    candidates = query_names._introducing(texts)
    assert candidates == {i for i, t in enumerate(texts) if phrase.search(t)} == {0, 1, 2, 3, 8, 9, 10, 11}
    assert candidates >= {i for i, t in enumerate(texts) if query_names._SELF_INTRO.search(t)}
    joined = "\n".join(["kate_x kate2 Kate", "xkate", "é kate-y", "the kate."])
    words = set(re.findall(r"\b[a-z]+\b", joined))
    for word in ("kate", "the", "x", "y", "xkate", "e", "ate"):
        assert query_names._lower_case_in(word, joined) == (word in words), word
