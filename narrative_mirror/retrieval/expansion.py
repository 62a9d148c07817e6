"""Growing a ranked list of messages by their context: neighbours and whole topic blocks.

Evidence for one answer often sits in consecutive messages (a question and its reply, a story
told over several turns), or, in a group chat, in the message a hit answers and the replies to it
(reply links), so a strong hit lends part of its score to the messages around it.
Rows are a chat's messages in file order (row index = position order).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence


def neighbours(row: int, before: int, after: int, size: int) -> list[tuple[int, int]]:
    """(row, distance) of the rows within ``before``/``after`` of ``row`` in a chat of ``size``
    rows, nearest first; at equal distance the later row first (replies follow)."""
    if not 0 <= row < size:
        raise ValueError(f"row {row} outside a chat of {size} messages")
    out = []
    for distance in range(1, max(before, after) + 1):
        if distance <= after and row + distance < size:
            out.append((row + distance, distance))
        if distance <= before and row - distance >= 0:
            out.append((row - distance, distance))
    return out


def block_range(message_ids: Sequence[str]) -> list[str]:
    """ALL local ids of a block, in order (a block is never shortened to a preview)."""
    return list(message_ids)


def expand(
    ranked: Sequence[tuple[int, float]],
    size: int,
    *,
    seeds: int,
    before: int,
    after: int,
    decay: float,
    block_of: Sequence[int] | None = None,
    block_rows: Mapping[int, Sequence[int]] | None = None,
    block_decay: float = 0.0,
    linked: Callable[[int], Sequence[int]] | None = None,
) -> tuple[list[tuple[int, float]], dict[int, str]]:
    """Spread the scores of the top ``seeds`` rows of ``ranked`` to their context.

    A neighbour at distance d gets ``seed_score * decay**d``; every other row of the seed's
    block (``block_of[row]`` -> block number, ``block_rows[block]`` -> its rows) gets
    ``seed_score * block_decay``; in a chat with reply links, the message the seed answers and
    the replies to it (``linked(row)``, wherever they are in the chat) get ``seed_score * decay``,
    as the nearest neighbours do. A row keeps the highest score it is given (its own included).
    Returns the re-sorted list (ties: earlier in ``ranked``, then first offered) and, for rows whose
    score came from expansion, the source ("neighbour", "reply" or "block").
    """
    scores = dict(ranked)
    order = {row: i for i, (row, _) in enumerate(ranked)}
    source: dict[int, str] = {}

    def offer(row: int, score: float, how: str) -> None:
        order.setdefault(row, len(order))
        if score > scores.get(row, float("-inf")):
            scores[row] = score
            source[row] = how

    for seed, seed_score in list(ranked)[:seeds]:
        for row, distance in neighbours(seed, before, after, size):
            offer(row, seed_score * decay**distance, "neighbour")
        for row in linked(seed) if linked is not None else ():
            offer(row, seed_score * decay, "reply")
        if block_of is not None and block_rows is not None and block_decay > 0 and block_of[seed] >= 0:
            for row in block_rows[block_of[seed]]:
                if row != seed:
                    offer(row, seed_score * block_decay, "block")
    out = sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))
    return out, source
