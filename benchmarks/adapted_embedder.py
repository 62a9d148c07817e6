"""The embedder adapted to the chats (narrative_mirror/adaptation) against the shipped MiniLM,
on the RealTalk TRAIN chats (Chat_1..Chat_7), leave-one-chat-out, in one run.

The adaptation trains on the 7 chats' MESSAGES only (pairs; never questions or gold): a held-out
chat's texts are in the unlabeled data, its questions never. For each embedder the chats are
encoded, layered and indexed, every category 1-3 question's candidate pool is collected, and the
learned fusion (the default pipeline's ranking) is re-fitted inside each fold on the other six
chats' pools and scores the seventh. Printed per chat and per category: dense R@10 (cosine
alone), hybrid R@10 (the pool's order), learned-fusion R@10 held out, and for the adapted
embedder the shipped fusion (fitted on the shipped model's features) too; then training
seconds beside one full encode of the same messages. Test chats are refused.

    .venv/bin/python benchmarks/adapted_embedder.py [--data DIR] [--pair-cap 2000] [--epochs 2] [--l2 0.001] [--json OUT]
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
from retrieval_variants import CATEGORIES, ChatData
from train_fusion import TrainingPools

from narrative_mirror import settings
from narrative_mirror.adaptation import store
from narrative_mirror.adaptation.training import AdaptationSettings
from narrative_mirror.chats import load_chat
from narrative_mirror.embedding import Embedder, fresh_model, message_texts
from narrative_mirror.gold import gold_qa_frame
from narrative_mirror.metrics.recall_at_k import recall_at_k
from narrative_mirror.retrieval import dense
from narrative_mirror.retrieval.engine import Retriever
from narrative_mirror.retrieval.learned_fusion import LearnedFusion
from resources import runtime


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


def measure(embedder: Embedder, chats, config: dict, shipped: LearnedFusion, l2: float) -> dict:
    """Per question: dense, hybrid, learned-held-out and shipped-fusion R@10, plus encode seconds."""
    with tempfile.TemporaryDirectory(prefix="nm_adapt_") as tmp:
        index = open_index(Path(tmp) / "lancedb")
        data, encode_seconds, dense_r10 = [], 0.0, []
        for chat_file, messages, qa in chats:
            started = time.perf_counter()
            vectors = embedder.encode(message_texts(messages))
            encode_seconds += time.perf_counter() - started
            index_chat(index, messages, vectors)
            data.append(ChatData(chat_file, messages, vectors, qa))
            ids = messages["local_id"].to_list()
            for qvec, gold in zip(embedder.encode(qa["question"].to_list()), qa["gold_ids"].to_list()):
                top = [ids[r] for r, _ in dense.top_k(dense.cosine_scores(vectors, qvec), 10)]
                dense_r10.append(recall_at_k(top, gold, 10))
            print(f"  {embedder.fingerprint}: {chat_file} indexed", file=sys.stderr)
        pools = TrainingPools.collect(Retriever(index, embedder, config), data)
    print(f"  {embedder.fingerprint}: pools of {len(pools.pools)} questions collected", file=sys.stderr)
    chat_of = np.array(pools.chat_of)
    hybrid = [recall_at_k(ids, gold, 10) for (ids, _), gold in zip(pools.pools, pools.golds)]
    learned, shipped_r10 = np.zeros(len(hybrid)), []
    for number, model in enumerate(pools.leave_one_chat_out(l2, features=shipped.features)):
        for q in np.flatnonzero(chat_of == number):
            ids, features = pools.pools[q]
            learned[q] = recall_at_k(ranked(ids, model.score(features[:, _columns(shipped)])), pools.golds[q], 10)
    for (ids, features), gold in zip(pools.pools, pools.golds):
        shipped_r10.append(recall_at_k(ranked(ids, shipped.score(features[:, _columns(shipped)])), gold, 10))
    return {"chat_of": chat_of, "category": np.array(pools.categories), "dense": np.array(dense_r10),
            "hybrid": np.array(hybrid), "learned": learned, "shipped_fusion": np.array(shipped_r10),
            "encode_seconds": encode_seconds, "chats": [c[0] for c in chats]}


def _columns(model: LearnedFusion) -> list[int]:
    from narrative_mirror.retrieval.learned_fusion import FEATURES

    return [list(FEATURES).index(name) for name in model.features]


def table(base: dict, adapted: dict) -> list[str]:
    head = (f"| part | n | dense R@10 base | adapted | hybrid R@10 base | adapted | pipeline (learned, LOCO) base | "
            f"adapted (re-fitted) | adapted, shipped fusion (fitted on all 7, not held out) |")
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    parts = [(name, base["chat_of"] == i) for i, name in enumerate(base["chats"])]
    parts += [(f"category {c}", base["category"] == c) for c in CATEGORIES]
    parts += [("all", np.ones(len(base["category"]), dtype=bool))]
    for name, part in parts:
        cells = [base["dense"][part], adapted["dense"][part], base["hybrid"][part], adapted["hybrid"][part],
                 base["learned"][part], adapted["learned"][part], adapted["shipped_fusion"][part]]
        lines.append(f"| {name} | {int(part.sum())} | " + " | ".join(f"{x.mean():.3f}" for x in cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--pair-cap", type=int, default=0, help="default: embedding.toml [adaptation] pair_cap")
    parser.add_argument("--epochs", type=int, default=0, help="default: embedding.toml [adaptation] epochs")
    parser.add_argument("--l2", type=float, default=1e-3)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--chats", default="", help="comma-separated chat numbers to keep (default all 7), e.g. 2,3")
    args = parser.parse_args(argv)

    section = dict(settings.load_config("embedding").get("adaptation", {}))
    section.update({k: v for k, v in (("pair_cap", args.pair_cap), ("epochs", args.epochs)) if v})
    adaptation_settings = AdaptationSettings.from_config(section)
    config = settings.load_config("retrieval")
    shipped = LearnedFusion.from_config(config["learned"])
    chats = load_chats(args.data)
    if args.chats:
        keep = {f"Chat_{n.strip()}_" for n in args.chats.split(",")}
        chats = [c for c in chats if any(c[0].startswith(k) for k in keep)]
    base = runtime.embedder(adaptation=False)

    with tempfile.TemporaryDirectory(prefix="nm_adaptation_") as folder:
        started = time.perf_counter()
        adaptation = store.adapt([m for _, m, _ in chats], adaptation_settings, Path(folder), base.model_name,
                                 device=base.device, load_model=lambda: fresh_model(base.model_name, base.device),
                                 log=lambda line: print(line, file=sys.stderr))
        train_seconds = time.perf_counter() - started
        adapted = Embedder(base.model_name, device=base.device, batch_size=base.batch_size,
                           adapted_layers=str(adaptation.layers_path), adaptation=adaptation.fingerprint)
        base_run = measure(base, chats, config, shipped, args.l2)
        adapted_run = measure(adapted, chats, config, shipped, args.l2)

    lines = table(base_run, adapted_run)
    report = adaptation.meta["report"]
    messages = sum(m.height for _, m, _ in chats)
    lines.append("")
    lines.append(f"adaptation {adaptation.fingerprint}: {adaptation.meta['pairs']} pairs ({report['train_pairs']} train, "
                 f"{report['held_out_pairs']} held out), {adaptation_settings.epochs} epochs max, run "
                 f"{report['epochs_run']}, best {report['best_epoch']}, held-out loss {report['held_out_loss']}")
    lines.append(f"training {train_seconds:.0f} s (lower layers {report['lower_seconds']:.0f} s) vs one full encode of "
                 f"the {messages} messages {base_run['encode_seconds']:.0f} s (adapted {adapted_run['encode_seconds']:.0f} s); "
                 f"device {base.device}")
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps({"table": lines, "meta": adaptation.meta, "train_seconds": train_seconds}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
