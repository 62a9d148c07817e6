"""Planner: facet decomposition (intent / target / artifact / time) and route selection.

Routes (seed 002): ``direct`` for a single fact about one target, ``multi_hop`` for several
conditions, comparisons, lists or causes, ``global`` for a story across the chat ("How did X
develop?"). The offline planner reads only the question's form; the LLM planner sees only the
question too, so nothing written in the chat can change the route.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, BeforeValidator

from narrative_mirror.agent.contract import Facets, Route
from narrative_mirror.agent.text import MONTHS, WEEKDAYS, content_tokens, time_phrases, time_words, tokens
from narrative_mirror.llm import LLMClient, LLMError
from narrative_mirror.settings import load_prompt

ROUTES: tuple[Route, ...] = ("direct", "multi_hop", "global")

_STORY = re.compile(
    r"\bhow\s+(?:did|has|have|does|do|was|were)\b.*\b(?:develop|develops|developed|go|goes|went|change|changed"
    r"|evolve|evolved|progress|progressed|turn\s+out|unfold|unfolded|end\s+up|cope|coped|handle|handled"
    r"|deal|dealt|grow|grew)\b"
    r"|\bwhat\s+happened\s+(?:with|to|after|between|during)\b"
    r"|\bover\s+(?:the\s+)?(?:time|weeks|months|sessions|course)\b|\bstory\s+of\b|\btimeline\b|\bjourney\b"
    r"|\bfrom\s+(?:the\s+)?(?:first|start|beginning)\b.*\b(?:to|until)\b|\bsummar(?:y|ize|ise)\b",
    re.IGNORECASE,
)
_MULTI = re.compile(
    r"\bboth\b|\bcompare|\bcomparison\b|\bdifference|\bdiffer\b|\bin\s+common\b|\beach\s+other\b"
    r"|\bwhat\s+are\s+(?:some|all)\b|\b(?:kinds|types|sorts)\s+of\b|\ball\s+the\b|\bwhich\s+\w+\s+(?:have|did|do)\s+both\b"
    r"|\bhow\s+(?:many|much|often)\b|\bwhy\b|\bbecause\b|\busually\b|\bever\b|\band\s+then\b",
    re.IGNORECASE,
)
_AUX = {
    "is",
    "are",
    "was",
    "were",
    "do",
    "does",
    "did",
    "can",
    "could",
    "will",
    "would",
    "has",
    "have",
    "had",
    "should",
    "shall",
    "may",
    "might",
    "must",
}
_QUESTION_WORDS = {"what", "when", "where", "who", "whom", "whose", "why", "which", "how"}
# Capitalized words that are not names of people or things.
_NOT_NAMES = (
    _QUESTION_WORDS
    | _AUX
    | {m.capitalize() for m in MONTHS}
    | {w.capitalize() for w in WEEKDAYS}
    | {"i", "i'm", "i've", "the", "a", "an", "in", "on", "at", "and", "or", "new", "year", "christmas", "easter"}
)


# "What did Bruno answer to Ana about the budget?", "Who replied to Dmitri about the bug?": who
# answered whom (agent/people.py follows the reply links); the verb of replying is the
# question's form, not what it is about.
_REPLY_FORM = re.compile(
    r"^\W*(?:what\s+(?:did|was)\s+.+?\b(?:answer|reply|respond|say|write)\w*\s+to\b"
    r"|who\s+(?:answered|replied|responded)\b)",
    re.IGNORECASE,
)
_REPLY_WORDS = {"answer", "answered", "reply", "replied", "respond", "responded", "say", "said", "write", "wrote"}


def reply_question(question: str) -> bool:
    """Whether the question asks what one person answered another, or who answered someone."""
    return bool(_REPLY_FORM.search(question))


# "When" / "where" opening the question (or after one word: "Since when"), not in a clause of it:
# "What helps Paola when she's tired?" asks what, "Can Vanessa ... when she faces aggression?" yes or no.
_WHEN = re.compile(r"^(?:\w+\s+)?when\b|\b(?:what\s+(?:time|date|day|month|year)|which\s+(?:day|date|month|year))\b")
_WHERE = re.compile(r"^(?:\w+\s+)?where\b|\bwhich\s+(?:place|city|country|town|restaurant|store|shop)\b")


def question_intent(question: str) -> str:
    words = tokens(question)
    if not words:
        return "what"
    if _STORY.search(question):
        return "story"
    text = " ".join(words)
    if re.search(r"\bhow\s+(?:many|much|often|long)\b", text):
        return "how_many"
    if _WHEN.search(text):
        return "when"
    if _WHERE.search(text):
        return "where"
    if re.search(r"\b(?:who|whom|whose)\b", text):
        return "who"
    if words[0] == "why" or re.search(r"\bwhy\b", text):
        return "why"
    if words[0] == "how":
        return "how"
    if words[0] in _AUX:
        return "yes_no"
    return "what"


def question_targets(question: str) -> list[str]:
    """Capitalized names in the question (consecutive ones joined: "Art Basel"), in order."""
    words = re.findall(r"[A-Za-z][\w'’-]*", question)
    names: list[str] = []
    current: list[str] = []
    for index, word in enumerate(words):
        bare = re.sub(r"['’]s$", "", word)
        is_name = (
            bare[:1].isupper()
            and bare.lower() not in _NOT_NAMES
            and bare not in _NOT_NAMES
            and not (index == 0 and bare.lower() in _QUESTION_WORDS | _AUX)
        )
        if is_name:
            current.append(bare)
            if bare != word:  # a possessive ends the name
                names.append(" ".join(current))
                current = []
        elif current:
            names.append(" ".join(current))
            current = []
    if current:
        names.append(" ".join(current))
    seen: list[str] = []
    for name in names:
        if name not in seen:
            seen.append(name)
    return seen


def facets_offline(question: str) -> Facets:
    targets = question_targets(question)
    excluded = {w for t in targets for w in tokens(t)} | time_words(question) | _QUESTION_WORDS | _AUX
    if reply_question(question):
        excluded |= _REPLY_WORDS
    artifact: list[str] = []
    for term in content_tokens(question, excluded):
        term = re.sub(r"'s$", "", term)
        if term not in excluded and term not in artifact:
            artifact.append(term)
    phrases = time_phrases(question)
    return Facets(
        intent=question_intent(question), target=targets, artifact=artifact, time=" ".join(phrases) if phrases else None
    )


def route_offline(question: str, facets: Facets) -> Route:
    if facets.intent == "story":
        return "global"
    if _MULTI.search(question) or facets.intent in ("why", "how_many"):
        return "multi_hop"
    if len(facets.target) >= 2 and re.search(r"\band\b", question, re.IGNORECASE):
        return "multi_hop"
    return "direct"


def plan_offline(question: str) -> tuple[Route, Facets, str]:
    """(route, facets, reason) from the question's form alone."""
    facets = facets_offline(question)
    route = route_offline(question, facets)
    return route, facets, f"rules: intent={facets.intent}, targets={facets.target}"


def _strings_or_none(value: object) -> object:
    return value if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


def _string_or_none(value: object) -> object:
    return value if isinstance(value, str) else None


# The route must be right; a facet the LLM leaves out or gets wrong is taken from the rules.
Strings = Annotated[list[str] | None, BeforeValidator(_strings_or_none)]
Text = Annotated[str | None, BeforeValidator(_string_or_none)]


class PlanReply(BaseModel):
    route: str
    intent: Text = None
    target: Strings = None
    artifact: Strings = None
    time: Text = None


def plan_llm(llm: LLMClient, question: str) -> tuple[Route, Facets, str]:
    """Route (and facets, where given well-formed) from the LLM; facets it leaves out or gets
    wrong come from the rules. Raises LLMError; a route outside ROUTES is malformed (the
    caller falls back to the rules)."""
    reply = llm.complete_json(load_prompt("agent_planner"), f"Question: {question}", PlanReply)
    route = reply.route.strip().lower()
    if route not in ROUTES:
        raise LLMError("malformed", f"planner route {route!r} is not one of {list(ROUTES)}")
    rules = facets_offline(question)

    def stripped(values: list[str] | None, limit: int) -> list[str] | None:
        return None if values is None else [v.strip() for v in values if v.strip()][:limit]

    target, artifact = stripped(reply.target, 5), stripped(reply.artifact, 10)
    facets = Facets(
        intent=reply.intent.strip().lower() if reply.intent and reply.intent.strip() else rules.intent,
        target=target if target is not None else rules.target,
        artifact=[a.lower() for a in artifact] if artifact else rules.artifact,
        time=reply.time.strip() if reply.time and reply.time.strip() else rules.time,
    )
    return route, facets, "llm"
