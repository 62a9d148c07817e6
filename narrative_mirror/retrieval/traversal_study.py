"""The tree-retrieval design's study: its variants (traversal.Variant), a results table with nDCG@10 and recall@10
at iteration 0 and at the best iteration (the iteration with the best mean nDCG@10, as the seed's
ndcg_summary reports it), and a leave-one-chat-out choice among variants and iterations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from narrative_mirror.metrics.ndcg_at_k import ndcg_at_k
from narrative_mirror.metrics.recall_at_k import recall_at_k
from narrative_mirror.retrieval.traversal import Variant

# The rows of the study; "flat" is the retriever's default search, nothing else (iteration 0 only).
VARIANTS = (
    Variant("flat", traverse=False, iterations=1),
    Variant("A (QE > flat > traversal; rewrite every 1)", expansion="thinkqe", rewrite_every=1),
    Variant("A rewrite every 2", expansion="thinkqe", rewrite_every=2),
    Variant("A rewrite every 0", expansion="thinkqe", rewrite_every=0),
    Variant("A explore=concat", expansion="thinkqe", rewrite_every=1, explore_mode="concat"),
    Variant("A explore=original", expansion="thinkqe", rewrite_every=1, explore_mode="original"),
    Variant("1 traversal only", flat=False),
    Variant("1b traversal + rewrite (leafslate)", flat=False, rewrite_every=1, context="leafslate"),
    Variant("2 QE thinkqe > traversal", expansion="thinkqe", flat=False),
    Variant("2b QE executor > traversal", expansion="executor", flat=False),
    Variant("schema > leaf rewrite > flat", schema=True, traverse=False, rewrite_every=1),
)
BASELINE = "flat"


def by_name(names: str | None) -> list[Variant]:
    """The VARIANTS whose names start with one of the comma-separated ``names`` (all for None)."""
    if not names:
        return list(VARIANTS)
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    matches = {w: [v for v in VARIANTS if v.name == w or v.name.startswith(w + " ")] for w in wanted}
    unknown = [w for w, found in matches.items() if not found]
    if unknown or not wanted:
        raise ValueError(f"no study variant named {unknown or names!r}; known: {[v.name for v in VARIANTS]}")
    return [v for v in VARIANTS if any(v in found for found in matches.values())]


def _at(rankings: Sequence[Sequence[str]], t: int) -> Sequence[str]:
    return rankings[min(t, len(rankings) - 1)]  # a run that stopped early keeps its last ranking


def per_iteration(rankings: Sequence[Sequence[Sequence[str]]], gold: Sequence[Sequence[str]]) -> list[dict]:
    """Per iteration t: mean nDCG@10 and recall@10 (percent) over the questions, each question's
    ranking at t being ``rankings[question][t]``."""
    if not rankings:
        return []
    out = []
    for t in range(max(len(r) for r in rankings)):
        ndcg = [ndcg_at_k(_at(r, t), g, 10) for r, g in zip(rankings, gold)]
        recall = [recall_at_k(_at(r, t), g, 10) for r, g in zip(rankings, gold)]
        out.append({"ndcg@10": 100 * sum(ndcg) / len(ndcg), "recall@10": 100 * sum(recall) / len(recall)})
    return out


def summary_row(name: str, rankings: Sequence[Sequence[Sequence[str]]], gold: Sequence[Sequence[str]]) -> dict:
    """A results-table row: iteration 0 and the best iteration (earliest on a tie)."""
    its = per_iteration(rankings, gold)
    best = max(range(len(its)), key=lambda t: (its[t]["ndcg@10"], -t))
    return {
        "variant": name,
        "n": len(gold),
        "ndcg@10 it0": its[0]["ndcg@10"],
        "recall@10 it0": its[0]["recall@10"],
        "best it": best,
        "ndcg@10 best": its[best]["ndcg@10"],
        "recall@10 best": its[best]["recall@10"],
    }


def leave_one_chat_out(
    rankings: Mapping[str, Sequence[Sequence[Sequence[str]]]],
    gold: Sequence[Sequence[str]],
    chats: Sequence[str],
    baseline: str = BASELINE,
) -> dict:
    """For each chat held out: the (variant, iteration) with the best mean nDCG@10 on the other
    chats, and its nDCG@10 on the held-out chat beside ``baseline``'s iteration 0. Returns
    {"folds": [...], "chosen": mean held-out nDCG@10 of the choices, "baseline": the baseline's}."""
    folds = []
    for held in dict.fromkeys(chats):
        train = [i for i, c in enumerate(chats) if c != held]
        test = [i for i, c in enumerate(chats) if c == held]
        if not train:
            raise ValueError("leave-one-chat-out needs questions from two chats or more")

        def score(name: str, t: int, rows: list[int]) -> float:
            return per_iteration([[_at(rankings[name][i], t)] for i in rows], [gold[i] for i in rows])[0]["ndcg@10"]

        options = [(name, t) for name, runs in rankings.items() for t in range(max(len(r) for r in runs))]
        name, t = max(options, key=lambda o: (score(*o, train), o[0] == baseline, -o[1]))
        folds.append(
            {
                "held_out": held,
                "chosen": f"{name} @ it {t}",
                "chosen_ndcg@10": score(name, t, test),
                "baseline_ndcg@10": score(baseline, 0, test),
                "n": len(test),
            }
        )
    total = sum(f["n"] for f in folds)
    return {
        "folds": folds,
        "chosen": sum(f["chosen_ndcg@10"] * f["n"] for f in folds) / total,
        "baseline": sum(f["baseline_ndcg@10"] * f["n"] for f in folds) / total,
    }


def format_table(rows: Sequence[dict]) -> str:
    """A markdown table of ``summary_row`` rows."""
    lines = [
        "| variant | n | nDCG@10 it0 | R@10 it0 | best it | nDCG@10 best | R@10 best |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['variant']} | {r['n']} | {r['ndcg@10 it0']:.1f} | {r['recall@10 it0']:.1f} | {r['best it']} | "
            f"{r['ndcg@10 best']:.1f} | {r['recall@10 best']:.1f} |"
        )
    return "\n".join(lines)
