"""A question set of chat exports with accepted answers (tests/answer_sets/<name>/: chats/ and
questions.json), scored as a reader would: an answer is right when it holds each required key
word (one of the "a|b" alternatives, as a whole word, any case) and does not abstain; a
never-said question is right only when the answer abstains. Per question kind and per chat,
today's code beside an earlier commit's, each building the chats with its own export readers
and layers into a temporary index and asking every question offline (the whole agent, not
only the answer step: these chats have no cached evidence).

    .venv/bin/python benchmarks/answers.py --set own_chats [--baseline 89f808b] [--show N]
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

# Run in a source tree (today's or a commit's): build the set's chats as the asset graph builds
# them (export readers, layers, index rows) into a temporary LanceDB, ask each question offline,
# print one JSON line per question. Vectors are shared between the runs through a pickle file.
ASK_SCRIPT = """
import json, pickle, sys, tempfile
from pathlib import Path
import numpy as np, polars as pl
from narrative_mirror import schema, settings
from narrative_mirror.embedding import Embedder, message_texts
try:
    from narrative_mirror.exports.folder import ImportOptions, find_folder_chats
except ImportError:  # a tree from before the rename
    from narrative_mirror.exports.folder import ImportOptions, find_chats as find_folder_chats
from narrative_mirror.exports.frames import load_export_chat
from narrative_mirror.index_rows import build_rows
from narrative_mirror.index_store import IndexStore
from narrative_mirror.layers import block_vectors, build_threads, build_topic_blocks, compute_signals
from narrative_mirror.query import ask
from narrative_mirror.retrieval.engine import Retriever
folder, questions, vector_file = Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text()), Path(sys.argv[3])
known = pickle.loads(vector_file.read_bytes()) if vector_file.is_file() else {}
embedder = Embedder()
options = ImportOptions(tz=questions["tz"], machine_tz=questions["tz"])
chats, problems = find_folder_chats(folder / "chats", options)
assert not problems, problems
store = IndexStore(str(Path(tempfile.mkdtemp(prefix="nm_answer_set_")) / "lancedb"))
config = settings.load_config("layers")
# Each export under the key its questions name: an older tree names chats otherwise (by native
# id), and the set has one chat per format.
named = {k.split("_")[0]: k for k in questions["chats"].values()}
exact = set(chats) & set(named.values())
for found, source in chats.items():
    if found not in exact and named[found.split("_")[0]] in exact:
        continue  # another channel of a named export (a Slack workspace's #general)
    key = found if found in exact else named[found.split("_")[0]]
    messages = load_export_chat(source, options).messages.with_columns(
        pl.lit(key).alias("chat_file"), (pl.lit(key + "/") + pl.col("local_id")).alias("message_id"))
    texts = message_texts(messages)
    missing = [t for t in dict.fromkeys(texts) if t not in known]
    if missing:
        known.update(zip(missing, embedder.encode(missing)))
    vectors = np.stack([known[t] for t in texts])
    blocks = build_topic_blocks(messages, vectors, config)
    signals = compute_signals(messages, blocks, config)
    threads = build_threads(blocks, signals, block_vectors(blocks, messages, vectors), config)
    embeddings = pl.DataFrame({"message_id": messages["message_id"], "chat_file": messages["chat_file"],
                               "local_id": messages["local_id"], "vector": list(vectors)}, schema=schema.MESSAGE_EMBEDDINGS)
    for table, rows in build_rows(messages, embeddings, signals=signals, blocks=blocks, threads=threads).items():
        store.replace_partition(table, key, rows)
vector_file.write_bytes(pickle.dumps(known))
retriever = Retriever(store, embedder, settings.load_config("retrieval"))
if sys.argv[4:] == ["pools"]:  # the learned fusion's training rows (benchmarks/train_fusion.py --sets)
    for q in questions["questions"]:
        (pool, features), = retriever.training_pools(q["chat"], [q["question"]])
        print(json.dumps({"id": q["id"], "pool": pool, "features": features.tolist()}))
    sys.exit(0)
for q in questions["questions"]:
    a = ask(retriever, q["chat"], q["question"])
    print(json.dumps({"id": q["id"], "answer": a.answer, "abstained": a.abstained, "evidence": a.selected_ids,
                      "evidence_texts": [item.text for item in a.evidence],
                      "claims": [[c.text, c.ids, c.supported] for c in a.claims]}))
"""

KINDS = ("who", "when", "where", "how_much", "yes_no", "why", "never_said")


def has_words(answer: str, required: list[str]) -> bool:
    """Whether ``answer`` holds, for each required entry, one of its "|" alternatives as whole words
    (a time or a number followed by am or pm counts: "9:15am" holds "9:15")."""

    def holds(word: str) -> bool:
        after = r"(?![\w])|(?=(?:am|pm)\b)" if word[-1:].isdigit() else r"(?![\w])"
        return re.search(rf"(?<![\w]){re.escape(word.lower())}(?:{after})", answer.lower()) is not None

    return all(any(holds(w) for w in entry.split("|")) for entry in required)


def is_right(question: dict, row: dict) -> bool:
    if question["kind"] == "never_said":
        return row["abstained"]
    return not row["abstained"] and has_words(row["answer"], question["required"])


def run_tree(tree: Path, folder: Path, vector_file: Path, mode: str = "ask") -> dict[str, dict]:
    """The set's answers from the source tree ``tree`` (its own process), by question id; with
    ``mode`` "pools" instead each question's candidate pool and its learned-fusion features."""
    proc = subprocess.run(
        [sys.executable, "-c", ASK_SCRIPT, str(folder), str(folder / "questions.json"), str(vector_file), mode],
        cwd=tree,
        env={
            "PYTHONPATH": str(tree),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "PATH": "/usr/bin:/bin",
            "NM_HOME": tempfile.mkdtemp(prefix="nm_home_"),
        },
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{tree} failed:\n{proc.stderr[-3000:]}")
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return {r["id"]: r for r in rows}


def summary(questions: list[dict], rows: dict[str, dict]) -> dict:
    """Right share overall, per kind and per chat; never-said abstention rate; how often a gold
    message was among the evidence shown (what retrieval gave the answer step to read); where the
    wrong answers' required words are in their evidence."""

    def share(group: list[dict]) -> dict:
        right = sum(is_right(q, rows[q["id"]]) for q in group)
        seen = [q for q in group if q["evidence"]]
        found = sum(bool(set(q["evidence"]) & set(rows[q["id"]]["evidence"])) for q in seen)
        return {
            "right": round(right / max(len(group), 1), 3),
            "n": len(group),
            "gold_in_evidence": round(found / max(len(seen), 1), 3),
        }

    answerable = [q for q in questions if q["kind"] != "never_said"]
    wrong = [q for q in answerable if not is_right(q, rows[q["id"]])]
    return {
        "overall": share(questions),
        "answerable": share(answerable),
        "per_kind": {k: share([q for q in questions if q["kind"] == k]) for k in KINDS},
        "per_chat": {
            c: share([q for q in questions if q["chat"] == c]) for c in dict.fromkeys(q["chat"] for q in questions)
        },
        "never_said_abstained": share([q for q in questions if q["kind"] == "never_said"])["right"],
        "answerable_abstained": round(sum(rows[q["id"]]["abstained"] for q in answerable) / max(len(answerable), 1), 3),
        "wrong_words_at": dict(Counter(words_at(q, rows[q["id"]]) for q in wrong)),
    }


WORDS_AT = ("message 1", "messages 2-3", "later", "none")


def words_at(question: dict, row: dict) -> str:
    """Where a wrong answer's required words are in the evidence it was given (the first message,
    the second or third, a later one, none): the answer step's miss, or retrieval's."""
    texts = row.get("evidence_texts", [])
    first = next((i for i, text in enumerate(texts) if has_words(text, question["required"])), None)
    if first is None:
        return "none"
    return WORDS_AT[0] if first == 0 else WORDS_AT[1] if first < 3 else WORDS_AT[2]


def score_set(name: str, baseline: str, show: int, as_json: bool) -> int:
    from common import REPO, commit_tree

    folder = REPO / "tests" / "answer_sets" / name
    questions = json.loads((folder / "questions.json").read_text())["questions"]
    vector_file = Path(tempfile.gettempdir()) / f"nm_answer_set_{name}_vectors.pkl"
    runs = {"now": run_tree(REPO, folder, vector_file)}
    if baseline:
        tree = commit_tree(baseline)
        runs[baseline] = run_tree(tree, folder, vector_file)
    report = {n: summary(questions, rows) for n, rows in runs.items()}
    if as_json:
        print(json.dumps(report, indent=1))
    else:
        print(
            f"answer set {name}: {len(questions)} questions, offline, balanced (right share; gold message in the evidence)"
        )
        print(f"{'':<34}" + "".join(f"{n:>24}" for n in runs))

        def line(label: str, cell) -> None:
            print(f"{label:<34}" + "".join(f"{cell(report[n]):>24}" for n in runs))

        line("overall", lambda r: f"{r['overall']['right']:.3f} n={r['overall']['n']}")
        line("answerable", lambda r: f"{r['answerable']['right']:.3f} ({r['answerable']['gold_in_evidence']:.2f})")
        for k in KINDS:
            line(
                f"kind {k}",
                lambda r, k=k: (
                    f"{r['per_kind'][k]['right']:.3f} n={r['per_kind'][k]['n']} ({r['per_kind'][k]['gold_in_evidence']:.2f})"
                ),
            )
        for c in report["now"]["per_chat"]:
            line(c, lambda r, c=c: f"{r['per_chat'][c]['right']:.3f} n={r['per_chat'][c]['n']}")
        line("never-said abstained", lambda r: f"{r['never_said_abstained']:.3f}")
        line("answerable abstained", lambda r: f"{r['answerable_abstained']:.3f}")
        line(
            "wrong: words in evidence 1/2-3/later/none",
            lambda r: "/".join(str(r["wrong_words_at"].get(w, 0)) for w in WORDS_AT),
        )
    wrong = [q for q in questions if not is_right(q, runs["now"][q["id"]])]
    for q in wrong[:show]:
        r = runs["now"][q["id"]]
        print(
            f"[{q['kind']}] {q['id']} {q['question']!r}\n   accepted: {q['reference']!r} {q['required']}\n"
            f"   now: {r['answer']!r} evidence {r['evidence'][:4]} gold {q['evidence']}"
        )
    return 0
