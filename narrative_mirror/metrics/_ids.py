"""Input checks shared by the metric functions."""

from __future__ import annotations

from collections.abc import Iterable


def id_list(ids: Iterable[str], what: str) -> list[str]:
    """``ids`` as a list; a bare string is refused because iterating it would yield characters."""
    if isinstance(ids, str):
        raise TypeError(f"{what} must be a collection of ids, not the string {ids!r}")
    return list(ids)


def id_set(ids: Iterable[str], what: str) -> set[str]:
    return set(id_list(ids, what))


def distinct_top_k(ranked: Iterable[str], k: int) -> list[str]:
    """The first ``k`` distinct ids of ``ranked``.

    A repeated id keeps the rank of its first occurrence and takes no further slot, so a
    ranked list is scored as the ranking of distinct messages it stands for.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    top: list[str] = []
    seen: set[str] = set()
    for doc_id in id_list(ranked, "ranked"):
        if doc_id not in seen:
            seen.add(doc_id)
            top.append(doc_id)
            if len(top) == k:
                break
    return top
