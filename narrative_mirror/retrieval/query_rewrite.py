"""The tree-retrieval design's query side: a rewriter that returns a query AND an action (explore / exploit), the
Query_t rule, context-free query expansion (baselines 2 / 2b), schema induction (3-5 categories
per query) and a rewrite cache keyed by (query, context, action).

Offline by default; the LLM versions take any ``LLMClient`` (prompts/traversal_*.txt, evidence
inside the data block). Action semantics (dual-path search): exploit = the evidence is in the
right region, refine it (Query_t = original + rewrite); explore = the evidence may be wrong,
escape it (Query_t = rewrite only, the previous rewrite's terms a negative constraint).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from narrative_mirror.agent.rewrite import declarative, feedback_terms
from narrative_mirror.agent.text import content_tokens, stem
from narrative_mirror.llm import DATA_BLOCK_NOTICE, LLMClient, LLMError, format_messages_as_data
from narrative_mirror.settings import load_prompt

EXPLORE, EXPLOIT = "explore", "exploit"
EXPLORE_MODES = ("replace", "concat", "original")  # Query_t on explore: rewrite only / original + rewrite / original
FEEDBACK_TERMS = 4
SCHEMA_MIN, SCHEMA_MAX = 3, 5
ANCHORED_SHARE = 0.5  # offline action: exploit when at least this share of the leaf evidence mentions the question


@dataclass(frozen=True)
class Rewritten:
    query: str
    action: str  # EXPLORE or EXPLOIT


def query_t(original: str, rewritten: Rewritten | None, explore_mode: str = "replace") -> str:
    """The query of a round: the original until a rewrite exists; on exploit original + rewrite;
    on explore the rewrite only (``replace``, the seed's best), original + rewrite (``concat``) or
    the original alone (``original``, the seed's worst: it cannot escape a bad anchor)."""
    if explore_mode not in EXPLORE_MODES:
        raise ValueError(f"explore_mode {explore_mode!r}: expected one of {EXPLORE_MODES}")
    if rewritten is None:
        return original
    if rewritten.action == EXPLOIT or explore_mode == "concat":
        return f"{original} {rewritten.query}"
    return rewritten.query if explore_mode == "replace" else original


def _mentions(text: str, stems: set[str]) -> bool:
    return any(stem(t) in stems for t in content_tokens(text))


def offline_rewrite(
    question: str,
    leaf_texts: Sequence[str],
    branch_texts: Sequence[str] = (),
    schema: Sequence[str] = (),
    previous: Rewritten | None = None,
) -> Rewritten:
    """Pseudo-relevance feedback with an action. Exploit when at least ANCHORED_SHARE of the leaf
    texts mention a content word of the question (the evidence sits where the question points),
    else explore. The rewrite is the question's statement form plus the FEEDBACK_TERMS terms the
    context repeats most; with a ``schema``, first the leaf term each category's evidence repeats
    most (categories structure the rewrite; branch text never becomes a term). On explore the
    previous rewrite's terms are excluded (negative constraint)."""
    asked = {stem(t) for t in content_tokens(question)}
    anchored = sum(_mentions(t, asked) for t in leaf_texts)
    action = EXPLOIT if leaf_texts and anchored >= ANCHORED_SHARE * len(leaf_texts) else EXPLORE
    exclude = list(content_tokens(question))
    if previous is not None and action == EXPLORE:
        exclude += content_tokens(previous.query)
    terms: list[str] = []
    for category in schema:
        wanted = {stem(t) for t in content_tokens(category)}
        about = [t for t in leaf_texts if _mentions(t, wanted)]
        terms += feedback_terms(about, exclude + terms, 1)
    context = [*leaf_texts, *branch_texts]
    terms += feedback_terms(context, exclude + terms, max(FEEDBACK_TERMS - len(terms), 0))
    return Rewritten(" ".join([declarative(question), *terms]).strip(), action)


def _count(failures: Counter | None, step: str, exc: LLMError) -> None:
    if failures is not None:
        failures[f"{step}: {exc.kind}"] += 1


class _Rewrite(BaseModel):
    query: str
    action: str = EXPLOIT


def llm_rewriter(llm: LLMClient, failures: Counter | None = None) -> Callable[..., Rewritten]:
    """``offline_rewrite``'s contract asked of ``llm`` (prompts/traversal_rewrite.txt): leaf
    evidence and branch context labelled apart, inside the data block; an action it does not
    name as explore counts as exploit. A failed call (malformed reply, timeout) falls back to
    ``offline_rewrite`` and is counted in ``failures`` by error kind."""

    def rewrite(
        question: str,
        leaf_texts: Sequence[str],
        branch_texts: Sequence[str] = (),
        schema: Sequence[str] = (),
        previous: Rewritten | None = None,
    ) -> Rewritten:
        system = load_prompt("traversal_rewrite") + "\n" + DATA_BLOCK_NOTICE
        rows = [(f"leaf{i}", "leaf evidence", t) for i, t in enumerate(leaf_texts)]
        rows += [(f"branch{i}", "branch context", t) for i, t in enumerate(branch_texts)]
        parts = [f"Question: {question}"]
        if schema:
            parts.append("Categories of evidence to cover: " + "; ".join(schema))
        if previous is not None:
            parts.append(f"Previous rewrite ({previous.action}): {previous.query}")
        parts.append("Evidence from the last search:\n" + format_messages_as_data(rows))
        try:
            reply = llm.complete_json(system, "\n\n".join(parts), _Rewrite)
        except LLMError as exc:
            _count(failures, "rewrite", exc)
            return offline_rewrite(question, leaf_texts, branch_texts, schema, previous)
        action = EXPLORE if reply.action.strip().lower() == EXPLORE else EXPLOIT
        return Rewritten(reply.query.strip() or question, action)

    return rewrite


def offline_expand(question: str, style: str) -> str:
    """Context-free query expansion, offline: ``thinkqe`` (baseline 2) the statement an answer
    would make (the question's statement form); ``executor`` (baseline 2b) a keyword query (its
    content words in lower case, each once)."""
    if style == "thinkqe":
        return declarative(question) or question
    if style == "executor":
        return " ".join(dict.fromkeys(t.lower() for t in content_tokens(question))) or question
    raise ValueError(f"expansion style {style!r}: expected 'thinkqe' or 'executor'")


class _Expansion(BaseModel):
    query: str


def llm_expander(llm: LLMClient, failures: Counter | None = None) -> Callable[[str, str], str]:
    """Context-free expansion asked of ``llm``: prompts/traversal_expand_<style>.txt (a failed
    call: ``offline_expand``, counted)."""

    def expand(question: str, style: str) -> str:
        try:
            reply = llm.complete_json(load_prompt(f"traversal_expand_{style}"), f"Question: {question}", _Expansion)
        except LLMError as exc:
            _count(failures, "expand", exc)
            return offline_expand(question, style)
        return reply.query.strip() or question

    return expand


def offline_schema(question: str, branch_texts: Sequence[str]) -> list[str]:
    """3-5 categories from the descriptions of the branches a flat search hit: the words (not the
    question's) that most descriptions share, as many as are shared by two or more, kept within
    SCHEMA_MIN..SCHEMA_MAX (ties: alphabetical)."""
    asked = {stem(t) for t in content_tokens(question)}
    counts = Counter(t for text in branch_texts for t in set(content_tokens(text)) if stem(t) not in asked)
    ranked = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    shared = sum(1 for w in ranked if counts[w] >= 2)
    return ranked[: min(max(shared, SCHEMA_MIN), SCHEMA_MAX)]


class _Schema(BaseModel):
    categories: list[str]


def llm_schema(llm: LLMClient, failures: Counter | None = None) -> Callable[[str, Sequence[str]], list[str]]:
    """Schema induction asked of ``llm`` (prompts/traversal_schema.txt), cut to SCHEMA_MAX and
    filled up to SCHEMA_MIN by ``offline_schema`` when it names fewer (or fails, counted)."""

    def induce(question: str, branch_texts: Sequence[str]) -> list[str]:
        rows = [(f"branch{i}", "branch", t) for i, t in enumerate(branch_texts)]
        try:
            reply = llm.complete_json(
                load_prompt("traversal_schema") + "\n" + DATA_BLOCK_NOTICE,
                f"Question: {question}\n\n{format_messages_as_data(rows)}",
                _Schema,
            )
            categories = reply.categories
        except LLMError as exc:
            _count(failures, "schema", exc)
            categories = []
        out = list(dict.fromkeys(c.strip() for c in categories if c.strip()))[:SCHEMA_MAX]
        for extra in offline_schema(question, branch_texts):
            if len(out) >= SCHEMA_MIN:
                break
            if extra not in out:
                out.append(extra)
        return out

    return induce


@dataclass
class RewriteCache:
    """Rewrites keyed by (kind, query, context, action): the same question with the same evidence
    and the same prior action is rewritten once (an LLM is asked once per key). With ``path``, the
    entries persist as JSON lines and are read back on the next run."""

    path: Path | None = None
    entries: dict[str, dict] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0

    def __post_init__(self) -> None:
        if self.path is not None and Path(self.path).is_file():
            for line_number, line in enumerate(Path(self.path).read_text().splitlines(), 1):
                try:
                    row = json.loads(line)
                    self.entries[row["key"]] = row["value"]
                except (json.JSONDecodeError, KeyError, TypeError) as exc:
                    raise ValueError(f"{self.path}: line {line_number} is not a rewrite cache entry ({exc})") from exc

    @staticmethod
    def key(kind: str, query: str, context: Sequence[str], action: str | None) -> str:
        return hashlib.sha256(json.dumps([kind, query, list(context), action]).encode()).hexdigest()

    def lookup(
        self, kind: str, query: str, context: Sequence[str], action: str | None, compute: Callable[[], dict]
    ) -> dict:
        key = self.key(kind, query, context, action)
        if key in self.entries:
            self.hits += 1
            return self.entries[key]
        self.misses += 1
        value = compute()
        self.entries[key] = value
        if self.path is not None:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as f:
                f.write(json.dumps({"key": key, "value": value}) + "\n")
        return value
