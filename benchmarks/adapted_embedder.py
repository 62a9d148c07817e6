"""The embedder adapted to the chats (narrative_mirror/adaptation) against the shipped MiniLM,
on the RealTalk TRAIN chats (Chat_1..Chat_7), leave-one-chat-out, in one run.

The adaptation trains on the 7 chats' MESSAGES only (pairs; never questions or gold): a held-out
chat's texts are in the unlabeled data, its questions never. For each embedder the chats are
encoded, layered and indexed, every category 1-3 question's candidate pool is collected, and the
learned fusion (the default pipeline's ranking) is re-fitted inside each fold on the other six
chats' pools and scores the seventh. Printed per chat and per category, shipped vs each adapted
variant: dense R@10 (cosine alone), hybrid R@10 (the pool's order), pool recall (gold anywhere
in the pool), the pipeline's R@10 (learned fusion, held out), the fusion given BOTH cosines
(adapted pools plus the shipped cosine; shipped pools plus the adapted cosine) and the shipped
fusion unchanged; for the first variant also the agent (`balanced`, offline) with each chat's
held-out fusion: R@10, exact evidence recall, answer F1, and the ARC cases' global recall and
phase coverage; then each training's seconds beside one full encode of the same messages, in
this process with the same torch threads. Test chats are refused.

    .venv/bin/python benchmarks/adapted_embedder.py [--data DIR] [--variant pair_cap=1000,top_layers=1 ...] [--no-agent] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl
from common import DEFAULT_DATA, index_chat, open_index, train_files
from hard_questions import held_out_agent
from retrieval_variants import CATEGORIES, ChatData
from train_fusion import TrainingPools

from narrative_mirror import settings
from narrative_mirror.adaptation import store
from narrative_mirror.adaptation.training import AdaptationSettings
from narrative_mirror.arcs import arcs_file_for, load_arc_cases
from narrative_mirror.chats import load_chat
from narrative_mirror.embedding import Embedder, fresh_model, message_texts
from narrative_mirror.gold import gold_qa_frame
from narrative_mirror.metrics.answer_f1 import answer_f1
from narrative_mirror.metrics.recall_at_k import recall_at_k
from narrative_mirror.retrieval import dense
from narrative_mirror.retrieval.engine import Retriever
from narrative_mirror.retrieval.learned_fusion import FEATURES, LearnedFusion, fit_listwise


def load_chats(data: Path) -> list[tuple[str, pl.DataFrame, pl.DataFrame]]:
    """(chat file, messages in file order, category 1-3 questions with resolvable gold) of each train chat."""
    out = []
    for path in train_files(data):
        chat = load_chat(path)
        qa = gold_qa_frame(chat).filter(pl.col("category").is_in(CATEGORIES) & (pl.col("gold_ids").list.len() > 0))
        out.append((chat.chat_file, chat.messages.sort("position"), qa))
    return out


def ranked(ids: list[str], scores: np.ndarray) -> list[str]:
    order = np.lexsort((np.arange(len(ids)), -scores))
    return [ids[i] for i in order]


def encode_home(embedder: Embedder, chats) -> tuple[list[np.ndarray], float]:
    """Every chat's message vectors and the seconds of that one full encode."""
    started = time.perf_counter()
    vectors = [embedder.encode(message_texts(messages)) for _, messages, _ in chats]
    return vectors, time.perf_counter() - started


def other_cosines(
    retriever: Retriever, pools: TrainingPools, data: list[ChatData], other: Embedder, other_vectors: list[np.ndarray]
) -> list[np.ndarray]:
    """Per pool, each candidate's cosine under the OTHER embedder (its message vectors, and the
    question's search text encoded by it): the extra feature of the both-cosines fusion."""
    rows_of = [dict(zip(chat.messages["local_id"].to_list(), range(chat.messages.height))) for chat in data]
    searched = [
        retriever._parse(retriever.chat(chat.chat_file), q)[2]
        for chat in data
        for q in chat.questions["question"].to_list()
    ]
    query_vectors = other.encode(searched)
    out = []
    for q, ((ids, _), number) in enumerate(zip(pools.pools, pools.chat_of)):
        rows = [rows_of[number][i] for i in ids]
        out.append(other_vectors[number][rows] @ query_vectors[q])
    return out


def held_out_scores(
    pools: TrainingPools, columns: list[int], names: list[str], l2: float, extra: list[np.ndarray] | None = None
) -> tuple[np.ndarray, list[LearnedFusion]]:
    """Each question's R@10 under the fusion fitted on the other chats, over ``columns`` of the
    pool features (and ``extra`` as one more feature when given); and the fold models."""
    x = [
        features[:, columns] if extra is None else np.column_stack([features[:, columns], extra[q]])
        for q, (_, features) in enumerate(pools.pools)
    ]
    stacked = np.concatenate(x)
    labels = np.concatenate([np.isin(ids, gold) for (ids, _), gold in zip(pools.pools, pools.golds)]).astype(float)
    question = np.concatenate([np.full(len(ids), q) for q, (ids, _) in enumerate(pools.pools)])
    chat_of = np.array(pools.chat_of)
    out = np.zeros(len(pools.pools))
    models = []
    for number in range(chat_of.max() + 1):
        keep = chat_of[question] != number
        model = fit_listwise(stacked[keep], labels[keep], question[keep], names, l2=l2)
        models.append(model)
        for q in np.flatnonzero(chat_of == number):
            out[q] = recall_at_k(ranked(pools.pools[q][0], model.score(x[q])), pools.golds[q], 10)
    return out, models


def measure(
    embedder: Embedder,
    chats,
    vectors: list[np.ndarray],
    config: dict,
    shipped: LearnedFusion,
    l2: float,
    agent: str,
    arcs_dir: Path,
    folder: Path,
    other: tuple[Embedder, list[np.ndarray]] | None = None,
) -> dict:
    """Per question: dense, hybrid, pool recall, pipeline (learned, held out) and shipped-fusion
    R@10 (and the both-cosines fusion given ``other``); with ``agent`` (a profile) the agent's
    measures and ARC. The index is built in ``folder``; the pools and retriever are kept
    (``_pools``, ``_retriever``, ``_data``) for features of another embedder."""
    index = open_index(folder / "lancedb")
    data, dense_r10 = [], []
    for (chat_file, messages, qa), chat_vectors in zip(chats, vectors):
        index_chat(index, messages, chat_vectors)
        data.append(ChatData(chat_file, messages, chat_vectors, qa))
        ids = messages["local_id"].to_list()
        for qvec, gold in zip(embedder.encode(qa["question"].to_list()), qa["gold_ids"].to_list()):
            top = [ids[r] for r, _ in dense.top_k(dense.cosine_scores(chat_vectors, qvec), 10)]
            dense_r10.append(recall_at_k(top, gold, 10))
    retriever = Retriever(index, embedder, config)
    pools = TrainingPools.collect(retriever, data)
    print(f"  {embedder.fingerprint}: pools of {len(pools.pools)} questions collected", file=sys.stderr)
    columns = [list(FEATURES).index(name) for name in shipped.features]
    names = list(shipped.features)
    out = {
        "chat_of": np.array(pools.chat_of),
        "category": np.array(pools.categories),
        "dense": np.array(dense_r10),
        "hybrid": np.array([recall_at_k(ids, gold, 10) for (ids, _), gold in zip(pools.pools, pools.golds)]),
        "pool_recall": np.array([recall_at_k(ids, gold, len(ids)) for (ids, _), gold in zip(pools.pools, pools.golds)]),
        "shipped_fusion": np.array(
            [
                recall_at_k(ranked(ids, shipped.score(features[:, columns])), gold, 10)
                for (ids, features), gold in zip(pools.pools, pools.golds)
            ]
        ),
        "chats": [c[0] for c in chats],
        "_pools": pools,
        "_retriever": retriever,
        "_data": data,
    }
    out["pipeline"], models = held_out_scores(pools, columns, names, l2)
    if other is not None:
        extra = other_cosines(retriever, pools, data, *other)
        out["both_cosines"], _ = held_out_scores(pools, columns, names + ["cosine_other"], l2, extra)
    if agent:
        out.update(agent_measures(index, embedder, data, config, models, agent, arcs_dir))
    return out


def shipped_pools_adapted_cosine(
    base_run: dict, shipped: LearnedFusion, l2: float, adapted: Embedder, adapted_vectors: list[np.ndarray]
) -> np.ndarray:
    """R@10 held out of the SHIPPED candidate pools and features with the adapted cosine as one
    more feature: the candidate lists BM25 fusion relied on, and the adapted model's signal."""
    pools = base_run["_pools"]
    extra = other_cosines(base_run["_retriever"], pools, base_run["_data"], adapted, adapted_vectors)
    columns = [list(FEATURES).index(name) for name in shipped.features]
    return held_out_scores(pools, columns, list(shipped.features) + ["cosine_other"], l2, extra)[0]


def agent_measures(
    index, embedder: Embedder, data: list[ChatData], config: dict, models, profile: str, arcs_dir: Path
) -> dict:
    """The agent with each chat's held-out fusion: per question R@10, exact recall and answer F1,
    per ARC case (``arcs_dir``) global recall and phase coverage."""
    arc_cases = {
        chat.chat_file: load_arc_cases(path, chat.messages)
        for chat in data
        if (path := arcs_file_for(arcs_dir, chat.chat_file))
    }
    rows, arc_rows = held_out_agent(index, embedder, data, config, models, arc_cases, profile)
    gold = {q["question_id"]: q["answer"] for chat in data for q in chat.questions.iter_rows(named=True)}
    chats = [chat.chat_file for chat in data]
    return {
        "agent_r10": np.array([r["r10"] for r in rows]),
        "exact": np.array([r["exact"] for r in rows]),
        "answer_f1": np.array([answer_f1(r["answer"], gold[r["question_id"]]) or 0.0 for r in rows]),
        "arc_chat_of": np.array([chats.index(r["chat"]) for r in arc_rows], dtype=int),
        "global_recall": np.array([r["global_recall"] for r in arc_rows], dtype=float),
        "phase_coverage": np.array([r["phase_coverage"] for r in arc_rows], dtype=float),
    }


def table(
    base: dict, adapted: dict, measures: list[str], chat_key: str = "chat_of", by_category: bool = True
) -> list[str]:
    """One markdown table: per chat, per category and all, each measure shipped | adapted."""
    names = [m for m in measures if m in adapted]
    head = "| part | n | " + " | ".join(f"{m} shipped | adapted" for m in names) + " |"
    lines = [head, "|---|---:|" + "---:|---:|" * len(names)]
    count = len(base[names[0]]) if names else 0
    parts = [(name, base[chat_key] == i) for i, name in enumerate(base["chats"])]
    if by_category:
        parts += [(f"category {c}", base["category"] == c) for c in CATEGORIES]
    parts += [("all", np.ones(count, dtype=bool))]
    for name, part in parts:
        if not part.any():
            continue
        cells = [
            f"{base[m][part].mean():.3f} | {adapted[m][part].mean():.3f}"
            if m in base
            else f"- | {adapted[m][part].mean():.3f}"
            for m in names
        ]
        lines.append(f"| {name} | {int(part.sum())} | " + " | ".join(cells) + " |")
    return lines


def overrides(assignments: str) -> dict:
    """``key=value,key=value`` (numbers parsed) over the [adaptation] section; a part without
    ``=`` continues the value before it (``pair_kinds=turns,questions``)."""
    out, key = {}, None
    for item in filter(None, (a.strip() for a in assignments.split(","))):
        if "=" not in item and key is not None:
            out[key] = f"{out[key]},{item}"
            continue
        key, _, value = item.partition("=")
        key, value = key.strip(), value.strip()
        out[key] = json.loads(value) if value[:1].isdigit() or value[:1] == "-" else value
    return out


def adapted_run(
    name: str, chats, section: dict, base: Embedder, folder: Path, measure_with, with_shipped_pools, agent: str
) -> tuple[dict, list[str]]:
    """Train one adaptation (``section``: [adaptation] settings), encode the home with it and
    measure it (``measure_with``, and ``with_shipped_pools`` for the shipped pools plus its
    cosine); the measures and its report lines."""
    settings_ = AdaptationSettings.from_config(section)
    started = time.perf_counter()
    adaptation = store.adapt(
        [m for _, m, _ in chats],
        settings_,
        folder,
        base.model_name,
        device=base.device,
        load_model=lambda: fresh_model(base.model_name, base.device),
        log=lambda line: print(f"  {name}: {line}", file=sys.stderr),
    )
    train_seconds = time.perf_counter() - started
    adapted = Embedder(
        base.model_name,
        device=base.device,
        batch_size=base.batch_size,
        adapted_layers=str(adaptation.layers_path),
        adaptation=adaptation.fingerprint,
    )
    vectors, encode_seconds = encode_home(adapted, chats)
    run = measure_with(adapted, vectors, agent)
    run["shipped_pools_plus_adapted_cosine"] = with_shipped_pools(adapted, vectors)
    report = adaptation.meta["report"]
    lines = [
        f"{name} = adaptation {adaptation.fingerprint}: {json.dumps(settings_.as_dict())}; {adaptation.meta['pairs']} pairs "
        f"({report['train_pairs']} train, {report['held_out_pairs']} held out), {report['texts']} distinct texts, "
        f"{report['steps']} steps, epochs run {report['epochs_run']} (best {report['best_epoch']}), stopped by "
        f"{report['stopped_by']}, held-out loss {report['held_out_loss']}",
        f"{name}: training {train_seconds:.0f} s (lower layers {report['lower_seconds']:.0f} s; compute {report['cost']} "
        f"encodes by the layer-token count; adapted encode {encode_seconds:.0f} s)",
    ]
    return run, lines


def report_tables(base_run: dict, run: dict, agent: str) -> list[str]:
    lines = [
        "retrieval, R@10 (pool_recall: gold anywhere in the hybrid pool; pipeline: learned fusion re-fitted per "
        "fold, held out; both_cosines: the same with the shipped cosine as one more feature; "
        "shipped_pools_plus_adapted_cosine: the shipped model's pools and features plus the adapted cosine, "
        "re-fitted per fold; shipped_fusion: retrieval.toml's weights, fitted on all 7 chats):"
    ]
    lines += table(
        base_run,
        run,
        [
            "dense",
            "hybrid",
            "pool_recall",
            "pipeline",
            "both_cosines",
            "shipped_pools_plus_adapted_cosine",
            "shipped_fusion",
        ],
    )
    if agent and "agent_r10" in run:
        lines += ["", f"agent ({agent}, offline, held-out fusion per chat):"]
        lines += table(base_run, run, ["agent_r10", "exact", "answer_f1"])
        lines += ["", "ARC cases:"]
        lines += table(base_run, run, ["global_recall", "phase_coverage"], chat_key="arc_chat_of", by_category=False)
    return lines


def main(argv: list[str] | None = None) -> int:
    import torch

    from resources import runtime

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--arcs", type=Path, default=None, help="ARC cases folder (default: realtalk_arcs beside the data)"
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="[adaptation] settings over embedding.toml's, e.g. pair_cap=1000,top_layers=1 (repeatable; "
        "default: embedding.toml's as they are); the agent runs for the first only",
    )
    parser.add_argument("--profile", default="balanced", help="the agent's profile")
    parser.add_argument("--no-agent", action="store_true", help="retrieval measures only (no agent, answers or ARC)")
    parser.add_argument("--l2", type=float, default=1e-3)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--chats", default="", help="comma-separated chat numbers to keep (default all 7), e.g. 2,3")
    args = parser.parse_args(argv)

    section = dict(settings.load_config("embedding").get("adaptation", {}))
    variants = args.variant or [""]
    # training and the encode it is compared with run with the same intra-op threads
    threads = AdaptationSettings.from_config(section).threads
    torch.set_num_threads(threads)
    config = settings.load_config("retrieval")
    shipped = LearnedFusion.from_config(config["learned"])
    arcs_dir = args.arcs or args.data.parent / "realtalk_arcs"
    chats = load_chats(args.data)
    if args.chats:
        keep = {f"Chat_{n.strip()}_" for n in args.chats.split(",")}
        chats = [c for c in chats if any(c[0].startswith(k) for k in keep)]
    base = runtime.embedder(adaptation=False)
    base_vectors, encode_seconds = encode_home(base, chats)
    messages = sum(m.height for _, m, _ in chats)
    head = (
        f"one full encode of the {messages} messages (shipped model): {encode_seconds:.0f} s; device {base.device}, "
        f"torch threads {threads}"
    )
    print(head, flush=True)
    agent = "" if args.no_agent else args.profile
    out = {"encode_seconds": encode_seconds, "variants": {}}
    with tempfile.TemporaryDirectory(prefix="nm_adaptation_") as folder:
        folder = Path(folder)
        base_run = measure(base, chats, base_vectors, config, shipped, args.l2, agent, arcs_dir, folder / "shipped")

        def measure_with(embedder, vectors, with_agent):
            return measure(
                embedder,
                chats,
                vectors,
                config,
                shipped,
                args.l2,
                with_agent,
                arcs_dir,
                folder / embedder.fingerprint.replace(":", "_"),
                other=(base, base_vectors),
            )

        def with_shipped_pools(embedder, vectors):
            return shipped_pools_adapted_cosine(base_run, shipped, args.l2, embedder, vectors)

        for number, assignments in enumerate(variants):
            name = f"variant {number + 1} ({assignments or 'embedding.toml'})"
            run, lines = adapted_run(
                name,
                chats,
                section | overrides(assignments),
                base,
                folder / "adaptation",
                measure_with,
                with_shipped_pools,
                agent if number == 0 else "",
            )
            lines = ["", f"## {name}", *report_tables(base_run, run, agent if number == 0 else ""), "", *lines]
            print("\n".join(lines), flush=True)
            out["variants"][name] = lines
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
