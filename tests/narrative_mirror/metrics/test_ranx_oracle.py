"""Oracle test: our ranking metrics against ranx on seeded random runs and qrels."""

from __future__ import annotations

import random

import numba
import pytest

# ranx's metrics are numba functions: compiling them cost ~80 s on a fresh environment (every CI
# run), interpreting them on these 200 queries well under a second. Before ranx is imported (its
# decorators read the switch); only this module imports ranx.
numba.config.DISABLE_JIT = True
from ranx import Qrels, Run, evaluate  # noqa: E402

from narrative_mirror.metrics import mrr_at_k, ndcg_at_k, precision, recall_at_k  # noqa: E402

QUERY_COUNT = 200
POOL = [f"D{day}:{n}" for day in range(1, 7) for n in range(1, 11)]  # 60 message ids


@pytest.fixture(scope="module")
def random_cases() -> list[dict]:
    rng = random.Random(20261122)
    cases = []
    for index in range(QUERY_COUNT):
        ranked = rng.sample(POOL, rng.randint(1, 40))
        # Our functions also get a copy with repeats; a repeat keeps its first rank, so the
        # scores must still equal ranx's on the distinct run.
        with_repeats = list(ranked)
        for _ in range(rng.randint(0, 5)):
            repeated = rng.randrange(len(with_repeats))
            with_repeats.insert(rng.randint(repeated + 1, len(with_repeats)), with_repeats[repeated])
        cases.append(
            {
                "query_id": f"q{index:03d}",
                "gold": rng.sample(POOL, rng.randint(1, 10)),
                "ranked": ranked,
                "ranked_with_repeats": with_repeats,
                "selected": rng.sample(POOL, rng.randint(1, 12)),
            }
        )
    return cases


def _ranx_scores(cases: list[dict], run_field: str, metrics: list[str]) -> dict[str, dict[str, float]]:
    qrels = Qrels.from_dict({case["query_id"]: {doc_id: 1 for doc_id in case["gold"]} for case in cases})
    # Strictly decreasing scores make ranx's order exactly the list order.
    run = Run.from_dict(
        {
            case["query_id"]: {
                doc_id: float(len(case[run_field]) - rank) for rank, doc_id in enumerate(case[run_field])
            }
            for case in cases
        }
    )
    evaluate(qrels, run, metrics)
    return {metric: dict(run.scores[metric]) for metric in metrics}


@pytest.mark.filterwarnings("ignore")
def test_ranking_metrics_match_ranx_per_query(random_cases):
    ours = {"recall": recall_at_k, "ndcg": ndcg_at_k, "mrr": mrr_at_k}
    metrics = [f"{name}@{k}" for name in ours for k in (1, 5, 10, 20)]
    reference = _ranx_scores(random_cases, "ranked", metrics)
    for metric in metrics:
        name, k = metric.split("@")
        for case in random_cases:
            expected = reference[metric][case["query_id"]]
            for ranked in (case["ranked"], case["ranked_with_repeats"]):
                assert ours[name](ranked, case["gold"], int(k)) == pytest.approx(expected, abs=1e-9), (
                    metric,
                    case["query_id"],
                )
    # The generated data must exercise the metrics, not just agree on zeros.
    assert 0.2 < sum(reference["recall@20"].values()) / QUERY_COUNT < 0.9
    assert sum(score == 1.0 for score in reference["mrr@10"].values()) >= 5


@pytest.mark.filterwarnings("ignore")
def test_precision_matches_ranx_precision_without_cutoff(random_cases):
    # ranx "precision" (no @k) is hits / number retrieved, the same as ours over the selected
    # set; ranx "precision@k" divides by k and is a different metric.
    reference = _ranx_scores(random_cases, "selected", ["precision"])["precision"]
    for case in random_cases:
        assert precision(case["selected"], case["gold"]) == pytest.approx(reference[case["query_id"]], abs=1e-9)
    assert any(0.0 < score < 1.0 for score in reference.values())
