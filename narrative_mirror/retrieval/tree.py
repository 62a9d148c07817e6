"""Dual-path tree retrieval (the tree-retrieval design) over the chat's tree: threads > blocks > messages.

1. Anchor search: one flat ranking over all nodes (messages, blocks, threads fused by RRF);
   its top ``anchors`` nodes are the anchors. Leaf anchors = L_init; branch anchors = B_hit
   (a thread stands for all its blocks).
2. Active branches: B_active = blocks of the L_init leaves | B_hit.
3. Density: density(u) = share of L_init leaves that lie in block u.
4. Path A (local, exploit): the leaf ranking restricted to messages inside B_active.
   Path B (global, explore): the top ``k_global`` of the leaf ranking over ALL messages.
5. Fusion: weighted RRF of path A and path B.
The seed's depth rule (path A drops branch nodes at the active branches' depth and passes only
leaves on) holds by construction: path A ranks messages only.

Explore/exploit rule: if the densest block holds at least ``density_threshold`` of the leaf
anchors, the anchors agree on where the answer is -> EXPLOIT (path A weighted
``exploit_weights``); if they are scattered -> EXPLORE (``explore_weights``, trusting the global
path more). Messages in neither path follow in leaf-ranking order, so the list stays complete.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from narrative_mirror.retrieval.fusion import rrf


@dataclass
class TreeResult:
    ranked: list[tuple[int, float]]  # message rows, best first
    mode: str  # "exploit" or "explore"
    active_blocks: list[int]
    density: dict[int, float]  # block -> share of leaf anchors in it
    path: dict[int, list[str]] = field(default_factory=dict)  # row -> ["local", "global"]


def dual_path(
    leaf_ranking: Sequence[tuple[int, float]],
    block_ranking: Sequence[tuple[int, float]],
    thread_ranking: Sequence[tuple[int, float]],
    *,
    block_of: Sequence[int],
    thread_blocks: Mapping[int, Sequence[int]],
    anchors: int = 20,
    k_global: int = 10,
    density_threshold: float = 0.3,
    exploit_weights: tuple[float, float] = (1.5, 1.0),
    explore_weights: tuple[float, float] = (1.0, 1.5),
    rrf_k: int = 60,
) -> TreeResult:
    """Fuse a local (active branches) and a global leaf path; see the module doc.

    ``leaf_ranking`` ranks message rows (ideally all of them), ``block_ranking`` block numbers,
    ``thread_ranking`` thread numbers; ``block_of[row]`` is a message's block (-1: none).
    """
    flat = rrf(
        [
            [("m", r) for r, _ in leaf_ranking],
            [("b", b) for b, _ in block_ranking],
            [("t", t) for t, _ in thread_ranking],
        ],
        k=rrf_k,
    )[:anchors]
    leaves = [node for kind, node in (n for n, _ in flat) if kind == "m"]
    branch_hits = {node for kind, node in (n for n, _ in flat) if kind == "b"}
    for kind, node in (n for n, _ in flat):
        if kind == "t":
            branch_hits.update(thread_blocks.get(node, ()))
    leaf_blocks = Counter(block_of[r] for r in leaves if block_of[r] >= 0)
    active = set(leaf_blocks) | branch_hits
    density = {b: n / len(leaves) for b, n in leaf_blocks.items()} if leaves else {}
    mode = "exploit" if density and max(density.values()) >= density_threshold else "explore"

    local = [r for r, _ in leaf_ranking if block_of[r] in active]
    global_ = [r for r, _ in leaf_ranking[:k_global]]
    weights = exploit_weights if mode == "exploit" else explore_weights
    fused = rrf([local, global_], weights=list(weights), k=rrf_k)
    path: dict[int, list[str]] = {}
    for name, rows in (("local", local), ("global", global_)):
        for r in rows:
            path.setdefault(r, []).append(name)
    seen = {r for r, _ in fused}
    rest = [(r, 0.0) for r, _ in leaf_ranking if r not in seen]
    return TreeResult(
        ranked=[(int(r), float(s)) for r, s in fused] + rest,
        mode=mode,
        active_blocks=sorted(active),
        density=density,
        path=path,
    )
