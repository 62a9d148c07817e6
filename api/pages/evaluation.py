"""The evaluation views' data: per chat and split, what ``qa_eval`` / ``arc_eval`` stored (every
question's gold ids against its returned ids, and the stage that lost each gold id, as
``attribute_losses`` decided during the evaluation), the filters over it, and recall@10 per
chat across the experiment log."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from api.pages.store import PageStore
from narrative_mirror.evaluation import STAGES

FOUND = "found"
OUTCOMES = (FOUND, *STAGES)
OUTCOME_WORDS = {
    FOUND: "found",
    "never_candidate": "never a candidate",
    "ranked_too_low": "ranked too low",
    "dropped_at_selection": "dropped at selection",
}
TOP = 10  # the returned ids shown: what recall@10 reads


def question_key(question_id: str) -> str:
    """The question's part of its id (``chat/q003`` -> ``q003``): what the page URL carries."""
    return question_id.rpartition("/")[2]


def gold_outcomes(row: dict[str, Any]) -> dict[str, str]:
    """Each gold id of a stored ``qa_eval`` row -> ``found`` or the stage that lost it."""
    lost = {g: stage for stage in STAGES for g in row.get(f"lost_{stage}") or ()}
    return {g: lost.get(g, FOUND) for g in row["gold_ids"]}


@dataclass(frozen=True)
class ChatEvaluation:
    chat: str
    split: str
    questions: int
    recall_at_10: float | None
    exact_recall: float | None
    lost: dict[str, int]
    fingerprint: str
    arc_cases: int
    arc_global_recall: float | None
    arc_phase_coverage: float | None


def _mean(frame: pl.DataFrame, column: str) -> float | None:
    return float(frame[column].mean()) if frame.height else None


def chat_evaluation(store: PageStore, chat: str) -> ChatEvaluation | None:
    """The chat's stored evaluation; None when it was never evaluated."""
    qa = store.stored("qa_eval", chat)
    if qa is None:
        return None
    split = store.stored("split", chat)
    arc = store.stored("arc_eval", chat)
    return ChatEvaluation(
        chat=chat,
        split=split["split"][0] if split is not None and split.height else "?",
        questions=qa.height,
        recall_at_10=_mean(qa, "recall@10"),
        exact_recall=_mean(qa, "exact_recall"),
        lost={s: int(qa[f"lost_{s}"].list.len().sum() or 0) for s in STAGES},
        fingerprint=qa["fingerprint"][0] if qa.height else "",
        arc_cases=arc.height if arc is not None else 0,
        arc_global_recall=_mean(arc, "arc_global_recall") if arc is not None else None,
        arc_phase_coverage=_mean(arc, "arc_phase_coverage") if arc is not None else None,
    )


def questions(store: PageStore, chat: str, category: int | None = None, lost: str | None = None) -> list[dict]:
    """The chat's evaluated questions, each with ``outcomes`` (gold id -> outcome); ``category``
    keeps one category, ``lost`` the questions with a gold id of that outcome."""
    qa = store.stored("qa_eval", chat)
    if qa is None:
        return []
    rows = []
    for row in qa.iter_rows(named=True):
        if category is not None and row["category"] != category:
            continue
        outcomes = gold_outcomes(row)
        if lost is not None and lost not in outcomes.values():
            continue
        rows.append({**row, "key": question_key(row["question_id"]), "outcomes": outcomes})
    return rows


def gold_questions(store: PageStore, chat: str) -> int:
    """How many gold questions the chat has (an export has none: nothing to evaluate it on)."""
    gold = store.stored("gold_qa", chat)
    return gold.height if gold is not None else 0


def categories(store: PageStore, chat: str) -> list[int]:
    qa = store.stored("qa_eval", chat)
    return sorted(qa["category"].unique().to_list()) if qa is not None else []


def question(store: PageStore, chat: str, key: str) -> dict | None:
    for row in questions(store, chat):
        if row["key"] == key:
            returned = row["ranked_ids"][:TOP]
            return {
                **row,
                "returned": returned,
                "missed": [g for g, outcome in row["outcomes"].items() if outcome != FOUND],
            }
    return None


@dataclass(frozen=True)
class Series:
    """One line of the history plot: (x = experiment number, recall@10) points."""

    name: str
    points: tuple[tuple[int, float], ...]
    per_chat: bool


def recall_history(store: PageStore, visible: list[str], all_visible: bool) -> tuple[list[dict], list[Series]]:
    """(the experiment records, in order, and recall@10 series over them). Per chat: a record's
    own ``partition`` (test evaluations), its ``per_chat`` figures when it has them, and the
    chat's stored ``qa_eval`` at the last record that covered the chat under the fingerprint it was
    evaluated with. Per
    split (``train (all chats)``): the summaries, shown only when every chat they cover is visible."""
    records = store.experiment_records()
    stored = {chat: chat_evaluation(store, chat) for chat in visible}

    def covers(record: dict, chat: str) -> bool:
        return record.get("partition") == chat or any(
            chat in chats for chats in (record.get("included") or {}).values()
        )

    per_chat: dict[str, dict[int, float]] = {}
    per_split: dict[str, dict[int, float]] = {}
    for n, record in enumerate(records):
        metrics = record.get("metrics") or {}
        chat = record.get("partition")
        for split, values in metrics.items():
            if not isinstance(values, dict):
                continue
            value = values.get("recall@10")
            if chat:
                if chat in visible and isinstance(value, int | float):
                    per_chat.setdefault(chat, {})[n] = float(value)
                continue
            covered = (record.get("included") or {}).get(split, [])
            if isinstance(value, int | float) and (all_visible or set(covered) <= set(visible)):
                per_split.setdefault(f"{split} (all chats)", {})[n] = float(value)
            for name, figures in (values.get("per_chat") or {}).items():
                if name in visible and isinstance(figures, dict) and isinstance(figures.get("recall@10"), int | float):
                    per_chat.setdefault(name, {})[n] = float(figures["recall@10"])
    for chat, evaluation in stored.items():
        # the last record that covered the chat under the fingerprint its stored rows were made with
        # (a summary records the qa_eval fingerprint of the chats it included, beside its own)
        n = max(
            (
                n
                for n, r in enumerate(records)
                if evaluation
                and covers(r, chat)
                and r.get("qa_fingerprint", r.get("fingerprint")) == evaluation.fingerprint
            ),
            default=None,
        )
        if n is not None and evaluation.recall_at_10 is not None:
            per_chat.setdefault(chat, {}).setdefault(n, evaluation.recall_at_10)
    series = [Series(name, tuple(sorted(points.items())), True) for name, points in sorted(per_chat.items())]
    series += [Series(name, tuple(sorted(points.items())), False) for name, points in sorted(per_split.items())]
    return records, series
