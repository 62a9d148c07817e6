"""Measure L1 blocks and L2 threads against gold evidence on TRAIN chats (refuses test files).

L1: how often two gold evidence ids of one question (or of one ARC phase) that lie in the same
session fall into the same block, compared with equal-length blocks of the same count per
session (so a segmentation only wins by putting boundaries in better places, not by being
coarser).
L2: for each ARC case, the share of its evidence blocks that the best single thread holds, next
to how much of the chat that thread is (a giant thread would hold everything).

    .venv/bin/python benchmarks/tune_layers.py /work/shared/datasets/realtalk --grid
Vectors are cached in --cache (default /tmp/nm_tune_cache) keyed by model and texts.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import time
from pathlib import Path

import numpy as np
from common import build_embedder, message_vectors, train_files

from narrative_mirror import settings
from narrative_mirror.arcs import arcs_file_for, load_arc_cases
from narrative_mirror.chats import load_chat
from narrative_mirror.gold import gold_qa_frame
from narrative_mirror.layers import block_vectors, build_threads, build_topic_blocks, compute_signals
from resources import environment


def load_train(data_dir: Path, cache: Path) -> list[dict]:
    embedder = build_embedder()
    chats = []
    for path in train_files(data_dir):
        chat = load_chat(path)
        vectors = message_vectors(chat.messages, embedder, cache)
        qa = gold_qa_frame(chat)
        arcs_path = arcs_file_for(environment.arcs_dir(data_dir), chat.chat_file)
        arcs = load_arc_cases(arcs_path, chat.messages) if arcs_path else None
        chats.append({"chat": chat, "vectors": vectors, "qa": qa, "arcs": arcs})
    return chats


def same_session_pairs(id_groups: list[list[str]], session_of: dict[str, int]) -> list[tuple[str, str]]:
    pairs = []
    for ids in id_groups:
        ids = [i for i in ids if i in session_of]
        pairs += [(a, b) for a, b in itertools.combinations(ids, 2) if session_of[a] == session_of[b]]
    return pairs


def equal_blocks(blocks, session_of_row: np.ndarray) -> np.ndarray:
    """Block number per message row for equal-length blocks, same block count per session."""
    labels = np.zeros(len(session_of_row), dtype=np.int64)
    next_label = 0
    for session, count in blocks.group_by("session").len().iter_rows():
        rows = np.flatnonzero(session_of_row == session)
        for part in np.array_split(rows, count):
            labels[part] = next_label
            next_label += 1
    return labels


def evaluate(chats: list[dict], config: dict) -> dict:
    qa_pairs = qa_same = qa_equal = arc_pairs = arc_same = arc_equal = 0
    n_blocks = n_messages = 0
    arc_held, arc_share, n_threads, thread_sizes = [], [], 0, []
    seconds = 0.0
    for item in chats:
        chat, vectors = item["chat"], item["vectors"]
        start = time.perf_counter()
        blocks = build_topic_blocks(chat.messages, vectors, config)
        signals = compute_signals(chat.messages, blocks, config)
        threads = build_threads(blocks, signals, block_vectors(blocks, chat.messages, vectors), config)
        seconds += time.perf_counter() - start
        n_blocks += blocks.height
        n_messages += chat.messages.height
        block_of = {m: b for b, ids in zip(blocks["block_id"], blocks["message_ids"]) for m in ids}
        row_of = {m: i for i, m in enumerate(chat.messages["local_id"])}
        session_of = dict(zip(chat.messages["local_id"], chat.messages["session"]))
        equal = equal_blocks(blocks, chat.messages["session"].to_numpy())

        pairs = same_session_pairs(item["qa"]["gold_ids"].to_list(), session_of)
        qa_pairs += len(pairs)
        qa_same += sum(block_of[a] == block_of[b] for a, b in pairs)
        qa_equal += sum(equal[row_of[a]] == equal[row_of[b]] for a, b in pairs)
        if item["arcs"] is None:
            continue
        phases = [ids for case in item["arcs"]["phase_evidence"].to_list() for ids in case]
        pairs = same_session_pairs(phases, session_of)
        arc_pairs += len(pairs)
        arc_same += sum(block_of[a] == block_of[b] for a, b in pairs)
        arc_equal += sum(equal[row_of[a]] == equal[row_of[b]] for a, b in pairs)

        thread_of = {b: t for t, ids in zip(threads["thread_id"], threads["block_ids"]) for b in ids}
        n_threads += threads.height
        thread_sizes += [len(ids) for ids in threads["block_ids"]]
        for case in item["arcs"]["phase_evidence"].to_list():
            case_blocks = {block_of[i] for ids in case for i in ids}
            in_threads = [thread_of[b] for b in case_blocks if b in thread_of]
            best = max(set(in_threads), key=in_threads.count) if in_threads else None
            arc_held.append(in_threads.count(best) / len(case_blocks) if best else 0.0)
            size = sum(1 for t in thread_of.values() if t == best) if best else 0
            arc_share.append(size / blocks.height)
    return {
        "blocks": n_blocks,
        "msgs/block": n_messages / n_blocks,
        "qa_same": qa_same / qa_pairs,
        "qa_equal": qa_equal / qa_pairs,
        "arc_same": arc_same / arc_pairs,
        "arc_equal": arc_equal / arc_pairs,
        "threads": n_threads,
        "max_thread": max(thread_sizes, default=0),
        "arc_held": float(np.mean(arc_held)),
        "arc_thread_share": float(np.mean(arc_share)),
        "seconds": seconds,
    }


def override(config: dict, section: str, **values) -> dict:
    changed = copy.deepcopy(config)
    changed[section].update(values)
    return changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/nm_tune_cache"))
    parser.add_argument("--grid", choices=["l1", "l2"], help="sweep a parameter grid of one layer")
    args = parser.parse_args()
    chats = load_train(args.data_dir, args.cache)
    print(f"train chats: {[c['chat'].chat_file for c in chats]}")
    base = settings.load_config("layers")
    variants: list[tuple[str, dict]] = [("layers.toml", base)]
    if args.grid == "l1":
        grid = itertools.product([4, 6, 8], [0.3, 0.4, 0.5, 99.0], [30.0, 45.0, 60.0, 1e9], [3, 5])
        for window, depth, gap, min_size in grid:  # depth 99 = time gaps only; gap 1e9 = meaning only
            name = f"window={window} depth={depth} gap={gap:g} min={min_size}"
            values = dict(window=window, depth_threshold=depth, time_gap_minutes=gap, min_block_messages=min_size)
            variants.append((name, override(base, "l1", **values)))
    elif args.grid == "l2":
        for threshold, weight in itertools.product([0.25, 0.3, 0.35, 0.4, 0.5], [0.0, 0.5, 1.0]):
            name = f"link={threshold} entity_weight={weight}"
            variants.append((name, override(base, "l2", link_threshold=threshold, entity_weight=weight)))
    for name, config in variants:
        result = evaluate(chats, config)
        print(
            name.ljust(36), "  ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in result.items())
        )


if __name__ == "__main__":
    main()
