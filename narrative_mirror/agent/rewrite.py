"""Query variants searched beside the question.

Offline variants are facet-driven (seed 002): the question's target, artifact and time facets
recombined, so each variant stresses one reading of the question. Corrective variants aim at
facets the evidence does not cover yet and add terms of the best evidence messages
(pseudo-relevance feedback). The LLM rewrite is grounded on LEAF evidence only: the messages of a
first flat search, never block or thread summaries (seed 003: leaf context grounds rewrites best).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from pydantic import BaseModel

from narrative_mirror.agent.contract import Facets
from narrative_mirror.agent.text import content_tokens, stem, tokens
from narrative_mirror.llm import DATA_BLOCK_NOTICE, LLMClient, format_messages_as_data
from narrative_mirror.settings import load_prompt

_LEADING = re.compile(
    r"^\s*(?:(?:what|when|where|who|whom|whose|why|which|how)(?:\s+(?:many|much|often|long|kind|kinds|type|types))?"
    r"(?:\s+of)?\s+)?(?:(?:is|are|was|were|do|does|did|can|could|will|would|has|have|had|should)\s+)?",
    re.IGNORECASE,
)


def declarative(question: str) -> str:
    """The question without its question word, auxiliary and question mark."""
    return _LEADING.sub("", question).rstrip(" ?!.").strip()


def _key(query: str) -> frozenset[str]:
    return frozenset(stem(t) for t in tokens(query))


def unique_queries(queries: Iterable[str], exclude: Iterable[str], limit: int) -> list[str]:
    """Non-empty queries whose stemmed word sets differ from each other and from ``exclude``."""
    if limit <= 0:
        return []
    seen = {_key(q) for q in exclude}
    out: list[str] = []
    for query in queries:
        query = " ".join(query.split())
        key = _key(query)
        if not key or key in seen:
            continue
        seen.add(key)
        out.append(query)
        if len(out) >= limit:
            break
    return out


def facet_variants(question: str, facets: Facets, limit: int) -> list[str]:
    """Up to ``limit`` facet-driven variants, most specific first."""
    artifact = " ".join(facets.artifact)
    time = facets.time or ""
    candidates = [
        " ".join(facets.target + [artifact]),
        declarative(question),
        artifact,
        *[f"{target} {artifact}" for target in facets.target if len(facets.target) > 1],
        f"{artifact} {time}" if time else "",
        # Halves of a long artifact: each side of a two-part question ("X and Y").
        *(
            [
                " ".join(facets.target + facets.artifact[: len(facets.artifact) // 2]),
                " ".join(facets.target + facets.artifact[len(facets.artifact) // 2 :]),
            ]
            if len(facets.artifact) >= 4
            else []
        ),
    ]
    return unique_queries(candidates, [question], limit)


# Where a multi-part question splits: conjunctions, comparisons, list commas.
_SPLIT = re.compile(
    r"\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or|but|versus|vs\.?|than|compared\s+(?:to|with)|as\s+well\s+as)\s+",
    re.IGNORECASE,
)


def sub_queries(question: str, facets: Facets, limit: int) -> list[str]:
    """The ``multi_hop`` route's sub-questions (seed 002), most specific first: the question's
    content for each person it names, then each side of a conjunction or comparison, with the
    people the question names. Empty when the question does not split."""
    artifact = " ".join(facets.artifact)
    per_target = [f"{target} {artifact}" for target in facets.target] if len(facets.target) > 1 else []
    body = declarative(question)
    if facets.target:  # "Emi and Elise" is one side: the names go back in front of each side
        names = "|".join(re.escape(t) for t in sorted(facets.target, key=len, reverse=True))
        body = re.sub(rf"(?:\b(?:{names})(?:['’]s)?\b(?:\s*(?:,|and|or|&)\s*)?)+", " ", body, flags=re.IGNORECASE)
    sides = [side for side in _SPLIT.split(body) if content_tokens(side)]
    per_side = [" ".join(facets.target + [side]) for side in sides] if len(sides) > 1 else []
    return unique_queries(per_target + per_side, [question], limit)


def feedback_terms(texts: Sequence[str], exclude: Iterable[str], n_terms: int) -> list[str]:
    """Terms most frequent across the best evidence texts, not already in the query."""
    excluded = {stem(e.lower()) for e in exclude}
    counts: Counter[str] = Counter()
    first_form: dict[str, str] = {}
    for text in texts:
        for term in set(content_tokens(text)):
            key = stem(term)
            if key not in excluded:
                counts[key] += 1
                first_form.setdefault(key, term)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [first_form[key] for key, _ in ranked[:n_terms]]


def corrective_variants(
    question: str,
    facets: Facets,
    uncovered: Sequence[str],
    evidence_texts: Sequence[str],
    done: Iterable[str],
    limit: int,
) -> list[str]:
    """Facet-driven re-search: uncovered facet terms first, then leaf feedback, then unused variants."""
    targets = " ".join(facets.target)
    query_words = [w for q in [question, *done] for w in tokens(q)]
    feedback = feedback_terms(evidence_texts, query_words, 4)
    candidates = [
        f"{targets} {' '.join(uncovered)}" if uncovered else "",
        " ".join(uncovered),
        f"{' '.join(facets.artifact)} {' '.join(feedback)}" if feedback else "",
        f"{targets} {' '.join(feedback[:2])}" if feedback and targets else "",
        *facet_variants(question, facets, limit + 6),
    ]
    return unique_queries(candidates, [question, *done], limit)


class RewriteReply(BaseModel):
    queries: list[str]


def llm_variants(llm: LLMClient, question: str, leaf_hits: Sequence[tuple[str, str, str]], limit: int) -> list[str]:
    """Rewrites grounded on leaf messages ``(id, speaker, text)`` of a first flat search."""
    system = load_prompt("agent_rewrite").replace("{limit}", str(limit)) + "\n" + DATA_BLOCK_NOTICE
    user = f"Question: {question}\n\nMessages from a first search:\n{format_messages_as_data(leaf_hits)}"
    reply = llm.complete_json(system, user, RewriteReply)
    return unique_queries(reply.queries, [question], limit)
