"""L1.5: cheap per-message signals (schema.MESSAGE_SIGNALS) and their per-block aggregate.

Everything is rule- and lexicon-based (no model download, no spaCy): entities from the chat's own
capitalization habits, temporal expressions and plans from regular expressions, sentiment and a
coarse emotion from small word lists, references back to earlier blocks from shared entities.

importance_tier = min(3, points), one point each for: a substantial message (>=
``long_message_tokens`` content words), a plan, a temporal expression, a non-speaker entity,
strong sentiment (|s| >= ``strong_sentiment``), an image, a reference to an earlier block.
Messages with fewer than ``min_content_tokens`` content words and no image ("lol", "hey!") are
tier 0 whatever their points. On the train chats (Chat_1..7, 5,982 messages) the share of
messages that are gold QA evidence rises with the tier: 6% (tier 0, 47% of messages), 12%
(tier 1), 21% (tier 2), 36% (tier 3, 13% of messages); base rate 14%.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import polars as pl

from narrative_mirror import schema
from narrative_mirror.layers.params import L15Params, section
from narrative_mirror.layers.text import STOPWORDS, content_tokens, speaker_words, straight_apostrophes, tokens

_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december"
    "|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec"
)
_COUNT = r"(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|few|a couple of|couple of|couple|\d+)"
_UNIT = r"(?:minutes?|mins?|hours?|hrs?|days?|weeks?|months?|years?)"
_PART_OF_DAY = r"(?:morning|afternoon|evening|night)"
_TEMPORAL = re.compile(
    r"\b(?:"
    rf"(?:this|next|last|coming|every)\s+(?:weekend|week|month|year|{_PART_OF_DAY}|summer|winter|spring|fall|autumn"
    rf"|semester|(?:{_WEEKDAYS}))"
    rf"|(?:in|within)\s+(?:the\s+next\s+)?{_COUNT}\s+(?:more\s+)?{_UNIT}"
    rf"|{_COUNT}\s+{_UNIT}\s+(?:ago|from now|later)"
    rf"|(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS})\b(?:,?\s+\d{{4}})?"
    rf"|(?:in|since|until|by|early|late|mid|end of)\s+(?:{_MONTHS})"
    r"|january|february|april|june|july|august|september|october|november|december"
    r"|\d{4}-\d{2}-\d{2}|\d{1,2}\.\d{1,2}\.\d{4}|\d{1,2}/\d{1,2}/\d{2,4}"
    rf"|(?:tomorrow|yesterday|today)\s+{_PART_OF_DAY}|tonight|tomorrow|tmrw|tmr|yesterday|today"
    r"|later today|later|soon|recently|lately|earlier|the weekend|weekends?"
    r"|(?:at|by|around)\s+\d{1,2}:\d{2}(?:\s*(?:am|pm))?|\d{1,2}(?::\d{2})?\s*(?:am|pm)"
    rf"|(?:on\s+)?(?:{_WEEKDAYS})s?"
    r"|christmas(?:\s+eve)?|new year'?s(?:\s+eve)?|thanksgiving|easter|halloween|nye"
    r")\b",
    re.IGNORECASE,
)
_TEMPORAL_LOWER = re.compile(_TEMPORAL.pattern)
# Month names that are also ordinary words only count when capitalized.
_AMBIGUOUS_MONTHS = re.compile(r"^(?:may|march|mar|jan|sep|dec|oct|nov|aug)\b")
_FUTURE_TEMPORAL = re.compile(
    rf"\b(?:tomorrow|tmrw|tmr|tonight|next\s+(?!to\b)\w+|coming|soon|this\s+weekend|in\s+{_COUNT}\s+{_UNIT}|{_WEEKDAYS})\b"
)
_FIRST_PERSON = re.compile(r"\b(?:i|we|i'm|im|we're|i'll|we'll|let's|lets|my|our)\b")
_PLAN = re.compile(
    r"\b(?:"
    r"(?:i|we)\s*(?:'m|\s+am|'re|\s+are)\s+(?:not\s+)?(?:going to|gonna|planning|about to|thinking (?:of|about)|hoping to)"
    r"|im\s+(?:not\s+)?(?:going to|gonna|planning|about to|thinking (?:of|about)|hoping to)"
    r"|(?:i|we)\s*(?:'ll|\s+will|\s+shall|\s+won't)"
    r"|(?:i|we)\s+(?:(?:plan|intend|hope|want|need|have)\s+to|wanna|gotta|gonna|might|may)\b"
    r"|let's\s+\w+"
    r")"
)
_QUESTION_START = re.compile(
    r"^\W*(?:what|when|where|who|whom|whose|why|how|which|do you|did you|are you|have you|can you|could you"
    r"|would you|will you|were you|is it|is that|is there|are there|was it|any plans|wanna)\b"
)
_NEGATIONS = frozenset("not no never nothing neither nor cannot".split()) | {
    t for t in STOPWORDS if t.endswith("n't") or t in {"dont", "didnt", "doesnt", "cant", "wont", "isnt", "wasnt"}
}
_POSITIVE = frozenset(
    """
    good great awesome amazing wonderful fantastic excellent love loved loving lovely nice fun enjoy enjoyed
    enjoying happy glad excited exciting beautiful best better perfect cool delicious yummy proud relaxing
    relaxed congrats congratulations yay thankful grateful appreciate fabulous incredible brilliant cute
    blessed impressive interesting peaceful fine favorite success successful win won
    """.split()
)
_NEGATIVE = frozenset(
    """
    bad terrible awful horrible hate hated sad sick ill hurt hurts pain painful tired exhausted stressed
    stressful worried worry anxious scared afraid angry annoyed annoying upset sorry miss lonely boring
    bored disappointed disappointing worst worse difficult hard sucks lost lose fail failed problem cry
    crying unfortunately ugh nervous frustrated frustrating broke broken injured fever flu
    """.split()
)
_EMOTIONS: dict[str, frozenset[str]] = {  # first listed wins a tie
    "joy": frozenset("happy glad excited exciting yay awesome amazing fun enjoy enjoyed love loved great".split()),
    "gratitude": frozenset("thankful grateful appreciate thanks congrats congratulations".split()),
    "sadness": frozenset("sad miss lonely cry crying disappointed unfortunately sorry".split()),
    "fear": frozenset("worried worry anxious scared afraid nervous".split()),
    "anger": frozenset("angry annoyed annoying frustrated frustrating hate mad ugh".split()),
    "surprise": frozenset("wow omg surprised surprise shocked unbelievable whoa".split()),
}
_EMOTIONS_OF = {
    w: [e for e, lexicon in _EMOTIONS.items() if w in lexicon] for w in frozenset().union(*_EMOTIONS.values())
}
_POSITIVE_EMOJI = re.compile(
    "[\U0001f600-\U0001f60f\U0001f617-\U0001f61d\U0001f970\u2764\U0001f495-\U0001f49f]|:\\)|:D|<3"
)
_NEGATIVE_EMOJI = re.compile("[\U0001f61e-\U0001f62d\U0001f630-\U0001f635\U0001f641\u2639]|:\\(")

# Capitalized words that are never entities on their own.
_NOT_ENTITIES = (
    frozenset(_WEEKDAYS.split("|"))
    | {f"{d}s" for d in _WEEKDAYS.split("|")}
    | frozenset(_MONTHS.split("|"))
    | STOPWORDS
)
_CASED_WORD = re.compile(r"[A-Za-z][A-Za-z\-]*(?:'[A-Za-z]+)?")


_SENTENCE_END = re.compile(r"[.!?\n]")


@lru_cache(maxsize=4096)  # the vocabulary pass and the entity pass read the same messages
def _words(text: str) -> tuple[tuple[str, bool, bool], ...]:
    """(word without possessive 's, starts a sentence, follows the previous word with only spaces
    between) for every cased word of ``text``."""
    text = straight_apostrophes(text)
    words = []
    previous_end = None
    for match in _CASED_WORD.finditer(text):
        word = match.group()[:-2] if match.group().endswith("'s") else match.group()
        start = match.start()
        if previous_end is None:
            words.append((word, True, False))
        else:
            sentence_start = _SENTENCE_END.search(text, previous_end, start) is not None
            words.append((word, sentence_start, text[previous_end:start].isspace()))
        previous_end = match.end()
    return tuple(words)


def proper_vocabulary(texts: list[str]) -> dict[str, bool]:
    """Lower-cased words this chat writes capitalized mid-sentence at least as often as
    lower-case -> whether the word is "strong" (lower-case at most a quarter as often).

    Learned per chat: a word is an entity because of how the same chat writes it elsewhere, so
    sentence-initial capitals ("Today ...") do not count and a lower-case "miami" still does.
    """
    capitalized: Counter[str] = Counter()
    lower: Counter[str] = Counter()
    for text in texts:
        for word, sentence_start, _ in _words(text):
            key = word.lower()
            if word[0].isupper() and not sentence_start:
                capitalized[key] += 1
            elif word[0].islower():
                lower[key] += 1
    return {
        w: 4 * lower[w] <= n for w, n in capitalized.items() if n >= lower[w] and len(w) >= 2 and w not in _NOT_ENTITIES
    }


def extract_entities(text: str, vocabulary: Mapping[str, bool], speakers: set[str]) -> list[str]:
    """Entities of one message, lower-case, in order of appearance.

    Runs of vocabulary words not separated by punctuation are candidates ("new york"); a run also
    takes in a following capitalized word ("New Year") and an inner "of" ("bank of america").
    A run is kept when a word of it is a speaker name, is capitalized mid-sentence here, or is
    strong: so "New York" and "miami" count but "a new job" or a sentence-initial "New" do not.
    """
    entities: list[str] = []
    run: list[str] = []
    anchored = False

    def end_run() -> None:
        nonlocal run, anchored
        while run and run[-1] == "of":
            run.pop()
        if run and anchored:
            entities.append(" ".join(run))
        run, anchored = [], False

    words = _words(text)
    for word, sentence_start, attached in words:
        if not attached:  # punctuation between words ends a name
            end_run()
        key = word.lower()
        capitalized_here = word[0].isupper() and not sentence_start
        if key in vocabulary or key in speakers:
            run.append(key)
            anchored = anchored or key in speakers or vocabulary.get(key, False) or capitalized_here
        elif run and ((capitalized_here and key not in _NOT_ENTITIES) or key == "of"):
            run.append(key)
        else:
            end_run()
    end_run()
    return list(dict.fromkeys(entities))


def temporal_expressions(text: str) -> list[str]:
    """Temporal expressions as written, in order ("tomorrow", "next week", "May 3")."""
    # The case-sensitive pattern on the lower-cased text finds the same spans ~3x faster, as long
    # as lower-casing kept the length (it does except for a few non-ASCII letters).
    lowered = text.lower()
    matches = _TEMPORAL_LOWER.finditer(lowered) if len(lowered) == len(text) else _TEMPORAL.finditer(text)
    found = []
    for match in matches:
        expression = text[match.start() : match.end()]
        if _AMBIGUOUS_MONTHS.match(expression.lower()) and not expression[0].isupper():
            continue
        found.append(expression.strip())
    return found


def is_plan(text: str) -> bool:
    """The speaker states an own future action: an explicit first-person future form, or a
    first-person statement with a future time ("we fly out Friday")."""
    lowered = straight_apostrophes(text).lower()
    if _PLAN.search(lowered):
        return True
    return bool(_FIRST_PERSON.search(lowered) and _FUTURE_TEMPORAL.search(lowered))


def speaks_of_self(text: str) -> bool:
    """The speaker talks about themselves (I, my, we, our, ...): where a person's opinions,
    habits, plans and feelings are said."""
    return bool(_FIRST_PERSON.search(straight_apostrophes(text).lower()))


def is_question(text: str) -> bool:
    lowered = straight_apostrophes(text).lower()
    return "?" in text or bool(_QUESTION_START.search(lowered))


def sentiment_and_emotion(text: str) -> tuple[float, str]:
    """(pos - neg) / (pos + neg + 1) over lexicon words and emoji, a word negated by one of the
    3 words before it counting for the other side; emotion = most frequent un-negated category."""
    words = tokens(text)
    positive = len(_POSITIVE_EMOJI.findall(text))
    negative = len(_NEGATIVE_EMOJI.findall(text))
    emotion_hits: Counter[str] = Counter()
    last_negation = -4
    for i, word in enumerate(words):
        negated = i - last_negation <= 3
        if word in _NEGATIONS:
            last_negation = i
        if word in _POSITIVE:
            positive, negative = (positive, negative + 1) if negated else (positive + 1, negative)
        elif word in _NEGATIVE:
            positive, negative = (positive + 1, negative) if negated else (positive, negative + 1)
        if not negated and word in _EMOTIONS_OF:
            emotion_hits.update(_EMOTIONS_OF[word])
    score = (positive - negative) / (positive + negative + 1)
    best = max(_EMOTIONS, key=lambda e: (emotion_hits[e], -list(_EMOTIONS).index(e)))
    return score, best if emotion_hits[best] else ""


def compute_signals(messages: pl.DataFrame, blocks: pl.DataFrame, params: Mapping[str, Any]) -> pl.DataFrame:
    """Signals of every message of one chat (schema.MESSAGE_SIGNALS, message order).

    ``blocks`` are the chat's L1 blocks; every message must be in exactly one of them.
    """
    p = section(params, "l15", L15Params)
    messages = schema.conform(messages, schema.MESSAGES, "compute_signals: messages")
    blocks = schema.conform(blocks, schema.BLOCKS, "compute_signals: blocks").sort("block_index")
    block_of: dict[str, int] = {}
    for row, ids in enumerate(blocks["message_ids"].to_list()):
        for local_id in ids:
            if local_id in block_of:
                raise ValueError(f"compute_signals: message {local_id} is in two blocks")
            block_of[local_id] = row
    missing = [i for i in messages["local_id"].to_list() if i not in block_of]
    if missing:
        raise ValueError(f"compute_signals: messages in no block: {missing[:5]}")

    texts = messages["text"].to_list()
    speakers = speaker_words(messages["speaker"].unique().to_list())
    vocabulary = proper_vocabulary(texts)
    entities = [extract_entities(t, vocabulary, speakers) for t in texts]
    message_blocks = [block_of[i] for i in messages["local_id"].to_list()]

    # References: non-speaker entities shared with earlier blocks, ignoring entities so common
    # across the chat's blocks (nicknames, the hometown) that they link everything.
    blocks_with: dict[str, set[int]] = defaultdict(set)
    for block, message_entities in zip(message_blocks, entities):
        for entity in message_entities:
            blocks_with[entity].add(block)
    too_common = {e for e, bs in blocks_with.items() if len(bs) > p.common_entity_block_share * blocks.height}
    block_ids = blocks["block_id"].to_list()
    image_urls = messages["image_urls"].to_list()
    image_captions = messages["image_caption"].to_list()

    rows = []
    for i, (text, block) in enumerate(zip(texts, message_blocks)):
        # entities: capitalized names/places/things of this chat, plus speaker names.
        topical = [e for e in entities[i] if e not in speakers]
        # references: earlier blocks sharing a non-speaker, not-too-common entity.
        referenced = sorted({b for e in topical if e not in too_common for b in blocks_with[e] if b < block})
        # refs: reference strength, saturating at refs_saturation referenced blocks.
        refs = min(1.0, len(referenced) / p.refs_saturation)
        # temporal: dates, weekdays, "tomorrow", "next week", "3 days ago", holidays, clock times.
        temporal = temporal_expressions(text)
        # plan: the speaker announces an own future action.
        plan = is_plan(text)
        # sentiment -1..1 and coarse emotion, from small lexicons with negation.
        sentiment, emotion = sentiment_and_emotion(text)
        # image: an attached image (url/file) or its caption.
        has_image = bool(image_urls[i]) or bool(image_captions[i])
        # tier: one point per signal present (see module docstring), trivial messages 0.
        n_content = len(content_tokens(text, exclude=speakers))
        points = (
            (n_content >= p.long_message_tokens)
            + plan
            + bool(temporal)
            + bool(topical)
            + (abs(sentiment) >= p.strong_sentiment)
            + has_image
            + (refs > 0)
        )
        tier = 0 if n_content < p.min_content_tokens and not has_image else min(3, int(points))
        rows.append(
            {
                "block_id": block_ids[block],
                "entities": entities[i],
                "temporal": temporal,
                "is_plan": plan,
                "is_question": is_question(text),  # a "?" or an interrogative opening
                "sentiment": sentiment,
                "emotion": emotion,
                "has_image": has_image,
                "ref_block_ids": [block_ids[b] for b in referenced[-p.max_ref_blocks :]] if p.max_ref_blocks else [],
                "refs": refs,
                "importance_tier": tier,
            }
        )
    ids = messages.select("message_id", "chat_file", "local_id")
    signals = pl.DataFrame(rows, schema={k: v for k, v in schema.MESSAGE_SIGNALS.items() if k not in ids.columns})
    return pl.concat([ids, signals], how="horizontal").select(list(schema.MESSAGE_SIGNALS))


BLOCK_SIGNALS = {
    "block_id": pl.String,
    "chat_file": pl.String,
    "n_messages": pl.Int64,
    "entities": pl.List(pl.String),  # most frequent first (ties alphabetical)
    "has_plan": pl.Boolean,
    "n_questions": pl.Int64,
    "mean_sentiment": pl.Float64,
    "max_tier": pl.Int64,
}


def block_signals(signals: pl.DataFrame) -> pl.DataFrame:
    """Per-block aggregate of message signals (``BLOCK_SIGNALS``), blocks in order of appearance."""
    signals = schema.conform(signals, schema.MESSAGE_SIGNALS, "block_signals: signals")
    rows = []
    for (block_id,), group in signals.group_by("block_id", maintain_order=True):
        counts = Counter(e for entities in group["entities"].to_list() for e in entities)
        rows.append(
            {
                "block_id": block_id,
                "chat_file": group["chat_file"][0],
                "n_messages": group.height,
                "entities": sorted(counts, key=lambda e: (-counts[e], e)),
                "has_plan": bool(group["is_plan"].any()),
                "n_questions": int(group["is_question"].sum()),
                "mean_sentiment": float(group["sentiment"].mean()),
                "max_tier": int(group["importance_tier"].max()),
            }
        )
    return pl.DataFrame(rows, schema=BLOCK_SIGNALS)
