"""Train the learned fusion (retrieval variant ``hybrid_learned``) on the RealTalk TRAIN chats.

For every question of categories 1-3 the hybrid candidate pool and its features are taken
from ``Retriever.training_pools``; the gold evidence ids label the pool. The R@10 printed
is held out: leave-one-chat-out over Chat_1..Chat_7 (each chat is ranked by weights fitted on
the other six), beside the hybrid order of the same pools. Then the weights are fitted on
all seven chats and printed as retrieval.toml's ``[learned]`` section (``--write`` replaces
that section in narrative_mirror/config/retrieval.toml). Test chats are refused.

With ``--sets`` a model is fitted instead on the read answer sets' gold ids (tests/answer_sets/,
GROUP_SETS: group chats in export formats) and reported, not written: held out is each set under
weights fitted on the others, beside the hybrid order and the shipped ``[learned]`` on the same
pools; R@1 and R@3 count, as an answer reads its first messages (docs/decisions.md: better
rankings, worse answers, not shipped).

    .venv/bin/python benchmarks/train_fusion.py [--data DIR] [--cache DIR] [--l2 0.001] [--write]
    .venv/bin/python benchmarks/train_fusion.py --sets

Retrain after changing the ``[hybrid]`` settings: the features include the hybrid lists.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
from common import DEFAULT_DATA, REPO, build_embedder, open_index
from retrieval_variants import CATEGORIES, ChatData, load_train

from narrative_mirror import settings
from narrative_mirror.metrics.recall_at_k import recall_at_k
from narrative_mirror.retrieval.engine import Retriever
from narrative_mirror.retrieval.hybrid import ranking
from narrative_mirror.retrieval.learned_fusion import FEATURES, LearnedFusion, fit_listwise, inputs_fingerprint


@dataclass
class TrainingPools:
    """Every train question's hybrid candidate pool with its features, labelled by the gold ids."""

    pools: list[tuple[list[str], np.ndarray]]
    golds: list[list[str]]
    categories: list  # RealTalk category, or the answer set's question kind
    chat_of: list[int]  # index of the question's chat (with --sets: of its set)

    @classmethod
    def collect(cls, retriever: Retriever, chats: Sequence[ChatData]) -> TrainingPools:
        data = cls([], [], [], [])
        for number, chat in enumerate(chats):
            data.pools += retriever.training_pools(chat.chat_file, chat.questions["question"].to_list())
            data.golds += chat.questions["gold_ids"].to_list()
            data.categories += chat.questions["category"].to_list()
            data.chat_of += [number] * chat.questions.height
        return data

    @classmethod
    def from_sets(cls, names: Sequence[str]) -> TrainingPools:
        """The pools of every answerable question with gold ids of the answer sets ``names``,
        each set built as benchmarks/answers.py --set builds it (answer_sets.run_tree)."""
        from answer_sets import run_tree

        data = cls([], [], [], [])
        for number, name in enumerate(names):
            folder = REPO / "tests" / "answer_sets" / name
            vector_file = Path(tempfile.gettempdir()) / f"nm_answer_set_{name}_vectors.pkl"
            rows = run_tree(REPO, folder, vector_file, mode="pools")
            for q in json.loads((folder / "questions.json").read_text())["questions"]:
                if q["evidence"]:
                    data.pools.append((rows[q["id"]]["pool"], np.array(rows[q["id"]]["features"])))
                    data.golds.append(q["evidence"])
                    data.categories.append(q["kind"])
                    data.chat_of.append(number)
        return data

    @cached_property
    def rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(features, gold labels, question index) of every pool row, built once for all fits."""
        x = np.concatenate([values for _, values in self.pools])
        labels = np.concatenate([np.isin(ids, gold) for (ids, _), gold in zip(self.pools, self.golds)]).astype(float)
        question = np.concatenate([np.full(len(ids), q) for q, (ids, _) in enumerate(self.pools)])
        return x, labels, question

    def fit(
        self, l2: float, without_chat: int | None = None, features: Sequence[str] = tuple(FEATURES)
    ) -> LearnedFusion:
        """The listwise model on every question, or on those of all chats but ``without_chat``;
        over ``features`` (default all, e.g. fewer for an earlier version that knows fewer)."""
        x, labels, question = self.rows
        keep = np.array(self.chat_of)[question] != without_chat
        columns = [list(FEATURES).index(name) for name in features]
        return fit_listwise(x[:, columns][keep], labels[keep], question[keep], list(features), l2=l2)

    def leave_one_chat_out(self, l2: float, features: Sequence[str] = tuple(FEATURES)) -> list[LearnedFusion]:
        """One model per chat, fitted on the other chats' questions (chat order)."""
        return [self.fit(l2, without_chat=number, features=features) for number in range(max(self.chat_of) + 1)]


def toml_section(model: LearnedFusion, note: str, inputs: str) -> str:
    def array(values) -> str:
        return "[" + ", ".join(repr(v) for v in values) + "]"

    cfg = model.to_config()
    lines = [
        "[learned]",
        f"# {note}",
        "# Written by benchmarks/train_fusion.py --write (features: learned_fusion.FEATURES); retrain it",
        "# after changing [hybrid], rrf_k or candidates: the features include the hybrid lists.",
        f'inputs = "{inputs}"  # learned_fusion.inputs_fingerprint at training: a test fails when it changes',
        f"features = {array(cfg['features'])}".replace("'", '"'),
    ]
    lines += [f"{key} = {array(cfg[key])}" for key in ("mean", "scale", "weights")]
    return "\n".join(lines) + "\n"


def write_section(section: str) -> Path:
    """Replace (or append) the ``[learned]`` section, which must stay the file's last."""
    path = settings.config_path("retrieval")
    text = path.read_text(encoding="utf-8")
    match = re.search(r"^\[learned\]\n", text, flags=re.M)
    head = text[: match.start()] if match else text.rstrip("\n") + "\n\n"
    path.write_text(head + section, encoding="utf-8")
    return path


# The answer sets whose questions have been read (their READMEs say so); the blind ones stay out of
# every fit so that they can judge it.
GROUP_SETS = ("own_chats", "own_chats_2", "own_chats_3", "own_chats_4", "own_chats_5", "own_chats_6", "own_chats_7")


def hit_at(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    return float(bool(set(ranked[:k]) & set(gold)))


def report_on_sets(l2: float) -> int:
    """Report a fit on GROUP_SETS, each set held out, against the shipped ``[learned]``."""
    started = time.perf_counter()
    data = TrainingPools.from_sets(GROUP_SETS)
    print(f"{len(data.pools)} questions with gold ids: pools in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    shipped = LearnedFusion.from_config(settings.load_config("retrieval")["learned"])
    columns = [list(FEATURES).index(f) for f in shipped.features]
    models = data.leave_one_chat_out(l2)
    orders = {
        "hybrid": [ids for ids, _ in data.pools],
        "[learned]": [[ids[i] for i in ranking(shipped.score(x[:, columns]))] for ids, x in data.pools],
        "held out": [
            [ids[i] for i in ranking(models[number].score(x))] for (ids, x), number in zip(data.pools, data.chat_of)
        ],
    }
    chat_of = np.array(data.chat_of)
    for number, name in [*enumerate(GROUP_SETS), (None, "all")]:
        part = np.flatnonzero(chat_of == number) if number is not None else np.arange(len(chat_of))
        cells = [
            f"{label} "
            + "/".join(f"{np.mean([hit_at(ranked[q], data.golds[q], k) for q in part]):.3f}" for k in (1, 3, 10))
            for label, ranked in orders.items()
        ]
        print(f"  {name:<12} n={len(part):>3}  R@1/R@3/R@10  " + "  ".join(cells))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", action="store_true", help="report a fit on the read answer sets (not written)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--cache", type=Path, default=None, help="folder to cache message vectors between runs")
    parser.add_argument("--l2", type=float, default=1e-3, help="L2 penalty on the standardized weights")
    parser.add_argument("--write", action="store_true", help="write the [learned] section into retrieval.toml")
    args = parser.parse_args(argv)
    if args.sets:
        return report_on_sets(args.l2)

    embedder = build_embedder()
    with tempfile.TemporaryDirectory(prefix="nm_fusion_") as tmp:
        store = open_index(Path(tmp) / "lancedb")
        chats = load_train(args.data, embedder, store, args.cache)
        retriever = Retriever(store, embedder, settings.load_config("retrieval"))
        started = time.perf_counter()
        data = TrainingPools.collect(retriever, chats)
        print(
            f"{len(data.pools)} questions, pools of {retriever.pool_size}: features in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )

    pools, golds, categories, chat_of = data.pools, data.golds, data.categories, np.array(data.chat_of)
    held_out = np.zeros(len(pools))  # R@10 of each question under weights fitted without its chat
    hybrid = np.array([recall_at_k(ids, gold, 10) for (ids, _), gold in zip(pools, golds)])
    for number, (chat, model) in enumerate(zip(chats, data.leave_one_chat_out(args.l2))):
        for q in np.flatnonzero(chat_of == number):
            ids, features = pools[q]
            order = ranking(model.score(features))
            held_out[q] = recall_at_k([ids[i] for i in order], golds[q], 10)
        part = chat_of == number
        print(
            f"  {chat.chat_file:<28} n={part.sum():>3}  R@10 hybrid {100 * hybrid[part].mean():5.1f}  "
            f"learned (held out) {100 * held_out[part].mean():5.1f}"
        )
    categories = np.array(categories)
    for category in CATEGORIES:
        part = categories == category
        print(
            f"  category {category:<19} n={part.sum():>3}  R@10 hybrid {100 * hybrid[part].mean():5.1f}  "
            f"learned (held out) {100 * held_out[part].mean():5.1f}"
        )
    note = (
        f"Leave-one-chat-out on Chat_1..7 ({len(pools)} questions): R@10 {100 * held_out.mean():.1f} "
        f"vs hybrid {100 * hybrid.mean():.1f}; l2 {args.l2:g}; fitted on all 7."
    )
    print(note)
    final = data.fit(l2=args.l2)
    section = toml_section(final, note, inputs_fingerprint(retriever.config))
    if args.write:
        print(f"wrote [learned] to {write_section(section)}")
    else:
        print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
