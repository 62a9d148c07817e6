"""A message's reactions as every export reader gives them and the index, the agent and the
inspector hand them on (a module of its own: the retrieval side reads it without the readers)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple


class Reaction(NamedTuple):
    emoji: str  # the emoji itself ("👍"), or ":name:" for a custom one the export names
    people: tuple[str, ...]  # who reacted, as far as the export lists them
    count: int  # how many reacted: more than ``people`` where the export lists only some

    @classmethod
    def listed(cls, emoji: str, people: Iterable[str], count: Any) -> Reaction:
        """As an export gives it: ``count`` when it is a number not below the people listed."""
        people = tuple(people)
        return cls(emoji, people, max(count, len(people)) if type(count) is int else len(people))


def stored(rows: list[dict] | None) -> tuple[Reaction, ...]:
    """A message's reactions as a stored frame or index row holds them (schema.REACTION dicts)."""
    return tuple(Reaction(r["emoji"], tuple(r["people"] or ()), r["count"]) for r in rows or ())


def reactions_of(pairs: Iterable[tuple[str, str]]) -> tuple[Reaction, ...]:
    """(person, emoji) pairs of one message as its reactions, one per emoji, in first-seen order."""
    people: dict[str, list[str]] = {}
    for person, emoji in pairs:
        if emoji:
            people.setdefault(emoji, []).append(person)
    return tuple(Reaction(emoji, tuple(names), len(names)) for emoji, names in people.items())


def reaction_words(emoji: str, people: Iterable[str], count: int) -> str:
    """A reaction as a person reads it: ``👍 Sam, Dee``, ``❤ Sam and 4 more``, ``🎉 3`` (no one named)."""
    people = list(people)
    if not people:
        return f"{emoji} {count}"
    more = count - len(people)
    return f"{emoji} {', '.join(people)}" + (f" and {more} more" if more > 0 else "")
