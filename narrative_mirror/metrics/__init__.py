"""Evidence-level retrieval metrics: one metric per module, checked against ranx.

Every metric returns None for a question whose gold set is empty (all its annotated ids were
unresolvable), and ``summarize`` leaves None out of averages.
"""

from narrative_mirror.metrics.arc import (
    ARC_METRIC_KEYS,
    arc_case_metrics,
    arc_global_recall,
    arc_phase_coverage,
    arc_phase_order,
)
from narrative_mirror.metrics.attribute_losses import OUTCOMES, attribute_losses
from narrative_mirror.metrics.exact_recall import exact_recall
from narrative_mirror.metrics.fuzzy_recall import fuzzy_recall
from narrative_mirror.metrics.mrr_at_k import mrr_at_k
from narrative_mirror.metrics.ndcg_at_k import ndcg_at_k
from narrative_mirror.metrics.per_question import QA_METRIC_KEYS, question_metrics
from narrative_mirror.metrics.precision import precision
from narrative_mirror.metrics.recall_at_k import recall_at_k
from narrative_mirror.metrics.summarize import summarize

__all__ = [
    "ARC_METRIC_KEYS",
    "OUTCOMES",
    "QA_METRIC_KEYS",
    "arc_case_metrics",
    "arc_global_recall",
    "arc_phase_coverage",
    "arc_phase_order",
    "attribute_losses",
    "exact_recall",
    "fuzzy_recall",
    "mrr_at_k",
    "ndcg_at_k",
    "precision",
    "question_metrics",
    "recall_at_k",
    "summarize",
]
