"""Issue #26's done-when check in full: train chats written out in each export format (WhatsApp
Android 12h and iOS 24h, Telegram, Slack with threads, Discord, Messenger with escaped text) and
imported, against the native JSON: recall@10 of the chat's questions, hits matched by message
text (each format has its own ids). Target: within 1 point of the native JSON.

    .venv/bin/python benchmarks/export_retrieval.py [--data ../shared/datasets/realtalk] [--chats Chat_1]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from common import DEFAULT_DATA, build_embedder, train_files

# The export writers live beside their tests and import the tests' shared helpers (tests/index_frames.py).
TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(TESTS / "narrative_mirror" / "exports"), str(TESTS)]
import realtalk_exports as rx  # noqa: E402

from narrative_mirror import Memory  # noqa: E402
from narrative_mirror.chats import load_chat  # noqa: E402
from narrative_mirror.evaluation import markdown_table  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--chats", nargs="*", default=["Chat_1"], help="train chat prefixes (default Chat_1; 'all')")
    parser.add_argument("--tz", default="Europe/Berlin", help="the zone RealTalk's local times are read in")
    args = parser.parse_args()
    files = train_files(args.data)
    if args.chats != ["all"]:
        files = [f for f in files if any(f.stem.startswith(f"{c}_") for c in args.chats)]
    vectors = rx.TextVectors(build_embedder())
    root = Path(tempfile.mkdtemp(prefix="export_retrieval_"))
    memory = Memory.open(root, embedder=vectors)
    store, retriever = memory.store, memory.retriever
    rows, totals = [], {}
    for path in files:
        chat = load_chat(path)
        questions = rx.gold_texts(chat)
        rx.index(store, chat, "native", vectors)
        native = rx.recall_by_text(retriever, "native", chat, questions)
        totals.setdefault("native", []).append((native, len(questions)))
        for fmt in rx.FORMATS:
            started = time.perf_counter()
            exported = rx.export_chat(chat, fmt, root / path.stem / fmt, args.tz)
            rx.index(store, exported, fmt, vectors)
            recall = rx.recall_by_text(retriever, fmt, exported, questions)
            totals.setdefault(fmt, []).append((recall, len(questions)))
            rows.append(
                {
                    "chat": path.stem,
                    "format": fmt,
                    "messages": exported.messages.height,
                    "sessions": exported.messages["session"].n_unique(),
                    "native sessions": chat.messages["session"].n_unique(),
                    "same texts": exported.messages["text"].to_list() == chat.messages["text"].to_list(),
                    "R@10": round(recall, 4),
                    "native R@10": round(native, 4),
                    "points": round(100 * (recall - native), 2),
                    "seconds": round(time.perf_counter() - started, 1),
                }
            )
            print(rows[-1], flush=True)
    print(markdown_table(rows))
    overall = [
        {
            "format": fmt,
            "questions": sum(n for _, n in pairs),
            "R@10": round(sum(r * n for r, n in pairs) / max(sum(n for _, n in pairs), 1), 4),
        }
        for fmt, pairs in totals.items()
    ]
    print(markdown_table(overall))


if __name__ == "__main__":
    main()
