"""Offline answer accuracy on the TRAIN chats: token F1 and containment against the gold answers
(LoCoMo-style normalization), overall, per category and per chat, today's answer step beside an
earlier commit's (default ff801dc) over the same evidence, in one run.

The evidence is retrieved once per question (the agent's graph up to its generator, balanced
profile, offline) and cached under /tmp with the index; each run then re-runs only the answer
step (generator + verification) over it, so a rule change costs seconds. The baseline's answer
step runs in that commit's own source tree (a subprocess) over an export of the same evidence.
Abstentions are counted with the false ones among them (a gold message was in the selected
evidence) and the evidence lines they list (how many of them gold).

    .venv/bin/python benchmarks/answers.py [--profile balanced] [--baseline ff801dc] [--refresh] [--show N]
        [--test-chats]  (the finished change on Chat_8..Chat_10 instead: a check, never a choice)
    .venv/bin/python benchmarks/answers.py --set own_chats [--baseline 89f808b]
        (a question set of chat exports with accepted answers instead: benchmarks/answer_sets.py)
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import hashlib
import json
import pickle
import re
import sys
import tempfile
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

# Run inside the baseline's source tree: its answer step (offline answer, the reply to a question
# in the evidence, offline verification) over the exported evidence; one JSON line per question.
BASELINE_SCRIPT = """
import json, sys
from datetime import datetime
from narrative_mirror.agent import answer as A
from narrative_mirror.agent.grading import FacetMatch
from narrative_mirror.embedding import Embedder
embedder = Embedder()
def message(m, grade, reply_to=None):
    ts = datetime.fromisoformat(m["timestamp"]) if m["timestamp"] else None
    match = FacetMatch(frozenset(m["artifact_terms"]), m["artifact_fraction"], m["target"])
    said = dict(local_id=m["local_id"], position=m["position"], speaker=m["speaker"], text=m["text"], timestamp=ts)
    if "message" not in A.EvidenceMessage.__dataclass_fields__:  # a tree before evidence held a ChatMessage
        return A.EvidenceMessage(**said, grade=grade, match=match, reply_to=reply_to)
    from narrative_mirror.retrieval.records import ChatMessage
    chat_message = ChatMessage(message_id=m["local_id"], session=0, **said)
    return A.EvidenceMessage(chat_message, grade=grade, match=match, reply_to=reply_to)
def local_id(e):
    return e.message.local_id if hasattr(e, "message") else e.local_id
def text_of(e):
    return e.message.text if hasattr(e, "message") else e.text
for line in open(sys.argv[1]):
    q = json.loads(line)
    evidence = [message(m, m["grade"]) for m in q["evidence"]]
    draft = A.offline_answer(q["question"], q["intent"], evidence, q["entities"], q["speakers"])
    if not draft[1]:
        have, wanted = {local_id(e) for e in evidence}, {}
        for e in evidence[:3]:
            nxt = q["next"].get(local_id(e))
            if "?" in text_of(e) and nxt is not None:
                wanted.setdefault(nxt["local_id"], (nxt, e))
        ids = [i for i in wanted if i not in have][:max(0, q["max_evidence"] - len(evidence))]
        replies = [message(wanted[i][0], wanted[i][1].grade, local_id(wanted[i][1])) for i in ids
                   if not wanted[i][0]["flagged"]]
        if replies:
            evidence += replies
            draft = A.offline_answer(q["question"], q["intent"], replies, q["entities"], q["speakers"])
    by_id = {local_id(e): e for e in evidence}
    cited = sorted({i for c in draft[1] for i in c.ids if i in by_id})
    relevance = {}
    if cited:
        said = {i: getattr(e, "message", e) for i, e in by_id.items()}
        vectors = embedder.encode([q["question"]] + [f"{said[i].speaker}: {said[i].text}" for i in cited])
        relevance = {i: float(v @ vectors[0]) for i, v in zip(cited, vectors[1:])}
    verified, notes, _ = A.check_claims(draft[1], by_id, q["intent"], relevance, q["artifact"])
    text = draft[0] if verified and len(verified) == len(draft[1]) else (
        " ".join(c.text for c in verified) if verified else A.NO_ANSWER)
    print(json.dumps({"question_id": q["question_id"], "answer": text, "abstained": not verified,
                      "selected": [m["local_id"] for m in q["evidence"]], "listed": list(by_id)}))
"""

# What the cached evidence depends on: the search side of the agent, the retrieval engine and the config.
SEARCH_SOURCES = [
    "narrative_mirror/agent/search_nodes.py",
    "narrative_mirror/agent/state.py",
    "narrative_mirror/agent/planner.py",
    "narrative_mirror/agent/grading.py",
    "narrative_mirror/agent/rewrite.py",
    "narrative_mirror/retrieval",
    "narrative_mirror/config",
]


def search_fingerprint(repo: Path, profile: str, files: list[Path]) -> str:
    digest = hashlib.sha256(profile.encode())
    for source in SEARCH_SOURCES:
        path = repo / source
        for f in sorted(path.rglob("*") if path.is_dir() else [path]):
            if f.is_file() and f.suffix in (".py", ".toml"):
                digest.update(f.read_bytes())
    for f in files:
        digest.update(f.name.encode() + f.read_bytes())
    return digest.hexdigest()[:16]


def retrieve_once(chats: dict, retriever, profile: str) -> list[dict]:
    """Per gold question, the graph state as the generator receives it (the agent's searches,
    pool and grades), captured by running the graph with a recording generator."""
    from narrative_mirror import query
    from narrative_mirror.agent import graph
    from narrative_mirror.gold import gold_qa_frame

    captured: dict[str, dict] = {}
    real_generator = graph.generator

    def recording(state, run):
        captured["state"] = copy.deepcopy(dict(state))
        return real_generator(state, run)

    graph.generator, graph._GRAPH = recording, None
    out = []
    try:
        for key, chat in chats.items():
            for q in gold_qa_frame(chat).iter_rows(named=True):
                query.ask(retriever, key, q["question"], profile=profile)
                out.append(
                    {
                        "question_id": q["question_id"],
                        "chat_file": key,
                        "category": q["category"],
                        "question": q["question"],
                        "gold": q["answer"],
                        "state": captured.pop("state"),
                    }
                )
    finally:
        graph.generator, graph._GRAPH = real_generator, None
    return out


class RememberedVectors:
    """The embedder with the vectors of texts it encoded before kept in a file (the answer step's
    similarity checks, re-run over the same evidence, encode the same texts every time)."""

    def __init__(self, embedder, path: Path):
        self.embedder, self.path = embedder, path
        self.vectors = pickle.loads(path.read_bytes()) if path.is_file() else {}

    def encode(self, texts: list[str]):
        import numpy as np

        missing = list(dict.fromkeys(t for t in texts if t not in self.vectors))
        if missing:
            self.vectors.update(zip(missing, self.embedder.encode(missing)))
        return np.stack([self.vectors[t] for t in texts])

    def save(self) -> None:
        self.path.write_bytes(pickle.dumps(self.vectors))

    def __getattr__(self, name: str):
        return getattr(self.embedder, name)


def answer_step(state: dict, retriever, profile):
    """Today's generator and verification over a cached state: the AgentAnswer."""
    from narrative_mirror.agent.answer_nodes import generator, verification
    from narrative_mirror.agent.state import Run

    run = Run.from_state(state, {"configurable": {"retriever": retriever, "profile": profile, "llm": None}})
    generator(state, run)
    verification(state, run)
    return run.result


def baseline_export(cached: list[dict], retriever, profile, path: Path) -> None:
    """The evidence of each cached question as the baseline's answer step reads it: the selected
    messages (best grade first), the next message of each (for its reply rule), the chat's names."""
    from narrative_mirror.agent.state import Run
    from narrative_mirror.agent.text import looks_like_injection

    def fields(hit, match) -> dict:
        return {
            "local_id": hit.local_id,
            "position": hit.position,
            "speaker": hit.speaker,
            "text": hit.text,
            "timestamp": hit.timestamp.isoformat() if hit.timestamp else None,
            "artifact_terms": sorted(match.artifact_terms),
            "artifact_fraction": match.artifact_fraction,
            "target": match.target,
            "flagged": looks_like_injection(hit.text),
        }

    with path.open("w") as out:
        for c in cached:
            run = Run.from_state(
                c["state"], {"configurable": {"retriever": retriever, "profile": profile, "llm": None}}
            )
            chosen = sorted(run.select(profile.max_evidence_fetches), key=lambda p: -p.grade)
            stored = {h.local_id: h for h in retriever.messages(run.chat_file, [p.hit.local_id for p in chosen])}
            evidence = [fields(stored[p.hit.local_id], p.match) | {"grade": p.grade} for p in chosen]
            reply_of = retriever.replies(run.chat_file, [e["local_id"] for e in evidence[:3]])
            following = {h.local_id: h for h in retriever.messages(run.chat_file, list(reply_of.values()))}
            entities, speakers = retriever.names(run.chat_file)
            out.write(
                json.dumps(
                    {
                        "question_id": c["question_id"],
                        "question": c["question"],
                        "intent": run.facets.intent,
                        "artifact": list(run.facets.artifact),
                        "evidence": evidence,
                        "max_evidence": profile.max_evidence_fetches,
                        "next": {
                            asked: fields(
                                following[nxt], run.matcher.match(following[nxt].speaker, following[nxt].text)
                            )
                            for asked, nxt in reply_of.items()
                        },
                        "entities": list(entities),
                        "speakers": list(speakers),
                    }
                )
                + "\n"
            )


def days_as_one(text: str) -> str:
    """``text`` with each full date written as one token ("On 02.01.2024." / "2 January 2024" /
    "Jan 2, 2024" -> "On 2024m1d2."): the annotators of different chats write the same day in
    different ways, which token F1 counts as wrong; this diagnostic shows how much of it is that."""
    from narrative_mirror.agent.dates import MONTH_NUMBERS, WRITTEN_DAYS

    def day_token(m: re.Match) -> str:
        g = m.groupdict()
        month = int(g["m"]) if g.get("m") else MONTH_NUMBERS[g["month"].lower()]
        return f"{g['year']}m{month}d{int(g.get('d') or g['day'])}"

    for pattern in WRITTEN_DAYS:
        text = pattern.sub(day_token, text)
    return text


def measures(rows: list[dict], answer: str) -> dict:
    """F1 / containment / words overall, per category, per question type and per chat (F1 only) of ``rows[answer]``."""
    from narrative_mirror.evaluation import UNANSWERABLE_CATEGORY
    from narrative_mirror.metrics.answer_contains import answer_contains
    from narrative_mirror.metrics.answer_f1 import answer_f1, answer_tokens

    def score(r: dict) -> tuple[float, float, float, float]:
        if r["category"] == UNANSWERABLE_CATEGORY:
            return (
                float(r[f"{answer}_abstained"]),
                float(r[f"{answer}_abstained"]),
                0.0,
                float(r[f"{answer}_abstained"]),
            )
        return (
            answer_f1(r[answer], r["gold"]) or 0.0,
            float(answer_contains(r[answer], r["gold"])),
            float(len(answer_tokens(r[answer]))),
            answer_f1(days_as_one(r[answer]), days_as_one(r["gold"])) or 0.0,
        )

    def summary(group: list[dict]) -> dict:
        scores = [score(r) for r in group]
        n = max(len(scores), 1)
        abstained = [r for r in group if r[f"{answer}_abstained"]]
        return {
            "answer_f1": round(sum(s[0] for s in scores) / n, 3),
            "answer_contains": round(sum(s[1] for s in scores) / n, 3),
            "answer_f1_days_as_one": round(sum(s[3] for s in scores) / n, 3),
            "answer_words": round(sum(s[2] for s in scores) / n, 1),
            "questions": len(group),
            "abstained": len(abstained),
            # a gold message was among the selected evidence, yet the answer abstained
            "false_abstentions": sum(bool(set(r["gold_ids"]) & set(r[f"{answer}_selected"])) for r in abstained),
            "abstention_lines": sum(len(r[f"{answer}_listed"]) for r in abstained),
            "abstention_gold_lines": sum(len(set(r["gold_ids"]) & set(r[f"{answer}_listed"])) for r in abstained),
        }

    by = lambda key: {k: [r for r in rows if r[key] == k] for k in sorted({r[key] for r in rows})}  # noqa: E731
    return {
        "overall": summary(rows),
        "per_category": {str(k): summary(g) for k, g in by("category").items()},
        "per_intent": {k: summary(g) for k, g in by("intent").items()},
        "per_chat": {k: summary(g)["answer_f1"] for k, g in by("chat_file").items()},
    }


def table(report: dict, names: list[str]) -> str:
    """The comparison as a text table: F1 (containment) per slice, one column per version."""
    first = report[names[0]]
    slices = [("overall", first["overall"])] + [(f"category {k}", v) for k, v in first["per_category"].items()]
    lines = [f"{'':<28}" + "".join(f"{n:>22}" for n in names)]
    for label, _ in slices:
        cells = []
        for n in names:
            m = report[n]["overall"] if label == "overall" else report[n]["per_category"][label.split()[1]]
            cells.append(f"{m['answer_f1']:.3f} ({m['answer_contains']:.3f}) n={m['questions']}")
        lines.append(f"{label:<28}" + "".join(f"{c:>22}" for c in cells))
    for intent in first["per_intent"]:
        cells = [
            f"{report[n]['per_intent'][intent]['answer_f1']:.3f} n={report[n]['per_intent'][intent]['questions']}"
            for n in names
        ]
        lines.append(f"{'type ' + intent:<28}" + "".join(f"{c:>22}" for c in cells))
    lines.append(
        f"{'F1, dates as days':<28}" + "".join(f"{report[n]['overall']['answer_f1_days_as_one']:>22.3f}" for n in names)
    )
    for key in ("abstained", "false_abstentions", "abstention_lines", "abstention_gold_lines"):
        lines.append(f"{key:<28}" + "".join(f"{report[n]['overall'][key]:>22}" for n in names))
    for chat in first["per_chat"]:
        lines.append(f"{chat:<28}" + "".join(f"{report[n]['per_chat'][chat]:>22.3f}" for n in names))
    return "\n".join(lines)


# Variants of today's answer step, each a set of module switches, measured over the same
# evidence in the same run: "now" as shipped, "typed bare" with only phrases quoted (a typed
# value left alone), "fragment" with the quote-when-unsure off (the answer step before it).
VARIANTS = {
    "now": {},
    "typed bare": {"narrative_mirror.agent.quoting.QUOTE_TYPED_VALUES": False},
    "fragment": {"narrative_mirror.agent.quoting.QUOTE_WHEN_UNSURE": False},
}


@contextlib.contextmanager
def switched(switches: dict):
    """Module attributes set for the block ("package.module.NAME": value), restored after."""
    import importlib

    saved = []
    try:
        for dotted, value in switches.items():
            module_name, name = dotted.rsplit(".", 1)
            module = importlib.import_module(module_name)
            saved.append((module, name, getattr(module, name)))
            setattr(module, name, value)
        yield
    finally:
        for module, name, value in reversed(saved):
            setattr(module, name, value)


def leave_one_chat_out(rows: list[dict], names: list[str]) -> dict:
    """Per held-out chat: the variant with the best F1 on the other chats, and its F1 on the held-out
    one; the mean of those beside each fixed variant's mean over chats (what a choice made on
    six annotators' chats scores on the seventh's). Per category too, to show where gains do
    not carry."""
    from narrative_mirror.metrics.answer_f1 import answer_f1

    def f1(group: list[dict], name: str) -> float:
        return sum((answer_f1(r[name], r["gold"]) or 0.0) for r in group) / max(len(group), 1)

    chats = sorted({r["chat_file"] for r in rows})
    folds = {}
    for held in chats:
        train = [r for r in rows if r["chat_file"] != held]
        test = [r for r in rows if r["chat_file"] == held]
        chosen = max(names, key=lambda n: f1(train, n))
        folds[held] = {"chosen": chosen, "held_out_f1": round(f1(test, chosen), 3)} | {
            n: round(f1(test, n), 3) for n in names
        }
    categories = sorted({r["category"] for r in rows})
    return {
        "folds": folds,
        "mean_held_out": round(sum(f["held_out_f1"] for f in folds.values()) / len(folds), 3),
        "mean_per_variant": {n: round(sum(f[n] for f in folds.values()) / len(folds), 3) for n in names},
        # spread of each category's F1 over chats: a rule tuned on some annotators' phrasing
        # shows as a high F1 on a few chats and little on the rest
        "per_category_per_chat": {
            str(k): {
                n: [round(f1([r for r in rows if r["chat_file"] == c and r["category"] == k], n), 3) for c in chats]
                for n in names
            }
            for k in categories
        },
        "chats": chats,
    }


def loco_table(loco: dict) -> str:
    lines = ["leave one chat out (variant chosen on the other chats, F1 on the held-out chat):"]
    for chat, fold in loco["folds"].items():
        cells = "  ".join(f"{n} {v:.3f}" for n, v in fold.items() if n not in ("chosen", "held_out_f1"))
        lines.append(f"  {chat:<10} chosen {fold['chosen']:<10} held-out {fold['held_out_f1']:.3f}   ({cells})")
    per = "  ".join(f"{n} {v:.3f}" for n, v in loco["mean_per_variant"].items())
    lines.append(f"  mean held-out {loco['mean_held_out']:.3f}   (fixed: {per})")
    lines.append("  per category, F1 per chat " + " ".join(loco["chats"]) + ":")
    for k, by in loco["per_category_per_chat"].items():
        for n, values in by.items():
            lines.append(f"    category {k} {n:<10} " + " ".join(f"{v:.2f}" for v in values))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--profile", default="balanced")
    parser.add_argument("--baseline", default="ff801dc", help="commit whose answer step is measured beside ('' = none)")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "nm_answers_cache")
    parser.add_argument("--refresh", action="store_true", help="retrieve the evidence again")
    parser.add_argument("--show", type=int, default=0, help="print this many wrong answers (question, gold, answer)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--rows", type=Path, default=None, help="write each question's answers (JSON lines) here")
    parser.add_argument("--test-chats", action="store_true", help="the test chats instead of the train chats")
    parser.add_argument("--set", default="", help="a question set of tests/answer_sets/ instead of RealTalk")
    args = parser.parse_args()
    if args.set:
        from answer_sets import score_set

        return score_set(args.set, args.baseline if args.baseline != "ff801dc" else "89f808b", args.show, args.json)

    from common import (
        DEFAULT_DATA,
        REPO,
        build_embedder,
        index_chat,
        message_vectors,
        open_index,
        run_at_commit,
        test_files,
        train_files,
    )

    from narrative_mirror import settings
    from narrative_mirror.agent.planner import question_intent
    from narrative_mirror.agent.profiles import get_profile
    from narrative_mirror.chats import load_chat
    from narrative_mirror.gold import gold_qa_frame
    from narrative_mirror.metrics.answer_f1 import answer_f1
    from narrative_mirror.retrieval.engine import Retriever

    files = (test_files if args.test_chats else train_files)(args.data or DEFAULT_DATA)
    key = search_fingerprint(REPO, args.profile, files)
    folder = args.cache / f"evidence_{key}"
    embedder = build_embedder()
    chats = {p.stem: load_chat(p) for p in files}
    store = open_index(folder / "lancedb")
    evidence_file = folder / "states.pkl"
    if args.refresh or not evidence_file.is_file():
        for chat in chats.values():
            index_chat(store, chat.messages, message_vectors(chat.messages, embedder, args.cache))
    retriever = Retriever(store, embedder, settings.load_config("retrieval"))
    if args.refresh or not evidence_file.is_file():
        evidence_file.write_bytes(pickle.dumps(retrieve_once(chats, retriever, args.profile)))
    cached = pickle.loads(evidence_file.read_bytes())
    profile = get_profile(args.profile)
    gold_ids = {
        q["question_id"]: q["gold_ids"] for chat in chats.values() for q in gold_qa_frame(chat).iter_rows(named=True)
    }
    retriever.embedder = RememberedVectors(embedder, folder / "vectors.pkl")

    rows = []
    for c in cached:
        rows.append(
            {k: c[k] for k in ("question_id", "chat_file", "category", "question", "gold")}
            | {"intent": question_intent(c["question"])}
            | {"gold_ids": gold_ids[c["question_id"]]}
        )
    for name, switches in VARIANTS.items():
        with switched(switches):
            for row, c in zip(rows, cached):
                result = answer_step(c["state"], retriever, profile)
                row.update(
                    {
                        name: result.answer,
                        f"{name}_abstained": result.abstained,
                        f"{name}_selected": [r.id for r in result.trace.final],
                        f"{name}_listed": result.selected_ids,
                    }
                )
    retriever.embedder.save()
    report = {
        "profile": args.profile,
        "questions": len(rows),
        "evidence_cache": str(evidence_file),
        **{name: measures(rows, name) for name in VARIANTS},
        "leave_one_chat_out": leave_one_chat_out(rows, list(VARIANTS)),
    }
    names = list(VARIANTS)
    if args.baseline:
        export = folder / "evidence.jsonl"
        baseline_export(cached, retriever, profile, export)
        old = {r["question_id"]: r for r in run_at_commit(args.baseline, BASELINE_SCRIPT, [str(export)])}
        for r in rows:
            mine = old[r["question_id"]]
            r.update(
                old=mine["answer"],
                old_abstained=mine["abstained"],
                old_selected=mine["selected"],
                old_listed=mine["listed"],
            )
        report[args.baseline] = measures(rows, "old")
        names.append(args.baseline)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        chats_of = "test" if args.test_chats else "train"
        print(f"answer step over cached evidence ({report['questions']} {chats_of} questions, {args.profile}, offline)")
        print(table(report, names))
        print(loco_table(report["leave_one_chat_out"]))
    if args.rows:
        args.rows.write_text("".join(json.dumps(r) + "\n" for r in rows))
    wrong = sorted(rows, key=lambda r: answer_f1(r["now"], r["gold"]) or 0.0)[: args.show]
    for r in wrong:
        print(f"[{r['category']}] {r['question_id']} {r['question']!r}\n   gold: {r['gold']!r}\n   now:  {r['now']!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
