from __future__ import annotations

from collections.abc import Iterable, Mapping

from narrative_mirror.metrics._ids import distinct_top_k, id_list, id_set
from narrative_mirror.metrics.exact_recall import exact_recall
from narrative_mirror.metrics.fuzzy_recall import fuzzy_recall
from narrative_mirror.metrics.mrr_at_k import mrr_at_k
from narrative_mirror.metrics.ndcg_at_k import ndcg_at_k
from narrative_mirror.metrics.precision import precision
from narrative_mirror.metrics.recall_at_k import recall_at_k

QA_METRIC_KEYS = (
    "recall@5",
    "recall@10",
    "recall@20",
    "ndcg@10",
    "mrr@10",
    "exact_recall",
    "fuzzy_recall",
    "fuzzy_recall@10",
    "precision",
)


def question_metrics(
    ranked: Iterable[str], selected: Iterable[str], gold: Iterable[str], positions: Mapping[str, int], window: int = 3
) -> dict[str, float | None]:
    """All QA metrics of one question, keyed by ``QA_METRIC_KEYS``.

    ``ranked`` is the retriever's ranked list (recall@k, ndcg@10, mrr@10, and
    ``fuzzy_recall@10`` over its first 10 distinct ids); ``selected`` is the answer's evidence
    set (``exact_recall``, ``fuzzy_recall``, ``precision``). Fuzzy keys use ``window`` (±3 by
    default). Every value is None when ``gold`` is empty, so the question drops out of averages.
    """
    ranked_ids = id_list(ranked, "ranked")
    selected_ids = id_list(selected, "selected")
    gold_ids = id_set(gold, "gold")
    return {
        "recall@5": recall_at_k(ranked_ids, gold_ids, 5),
        "recall@10": recall_at_k(ranked_ids, gold_ids, 10),
        "recall@20": recall_at_k(ranked_ids, gold_ids, 20),
        "ndcg@10": ndcg_at_k(ranked_ids, gold_ids, 10),
        "mrr@10": mrr_at_k(ranked_ids, gold_ids, 10),
        "exact_recall": exact_recall(selected_ids, gold_ids),
        "fuzzy_recall": fuzzy_recall(selected_ids, gold_ids, positions, window),
        "fuzzy_recall@10": fuzzy_recall(distinct_top_k(ranked_ids, 10), gold_ids, positions, window),
        "precision": precision(selected_ids, gold_ids),
    }
