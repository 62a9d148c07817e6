"""Gold QA evidence: resolve the messy annotation strings of RealTalk/LoCoMo to message ids.

Forms found in the real files and how they are read (``parse_evidence``):
- plain ids ``D5:3``; stray spaces and dots ``D 2:18``, ``D5:3.``;
- lists separated by ``;`` ``,`` ``. `` or spaces: ``D5:12;D5:16``, ``D13:4. D14:4``;
- ranges ``D12:3-D12:5``: every message between the two ids in FILE order when both exist;
  if one end is missing and both ends are on the same day, the existing ids of that day
  numbered between them (the missing end is reported unresolved); otherwise unresolved;
- ``D13:45:D20:19``: two ids (a ':' typed for a separator). Read as a list, not a range: in
  the one real case the two messages are the answer's two facts, a range would be 188 messages;
- ``D17;39``: a ';' typed for ':' -> ``D17:39`` (no other reading: ``D17`` alone is no id);
- ``23:29``: the ``D`` left out -> ``D23:29``;
- ``D:56`` (day missing; several days have a message 56) and ``D58`` (``D5:8``? ``D58:?``) are
  ambiguous and stay unresolved, as does any id not in the file;
- an empty string holds no id: nothing resolved, nothing unresolved (it stays visible in
  ``evidence_raw``).
Unresolved parts are reported with whitespace removed, otherwise as written. Forms read with a
guess are listed per question in ``oddities``: an evidence field that is one string instead of a
list, a range written backwards (``D1:3-D1:1``, read as ``D1:1-D1:3``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from narrative_mirror import schema
from narrative_mirror.chats import Chat, ChatFormatError

_PART = re.compile(
    r"(?P<range>D\d+:\d+-D\d+:\d+)"
    r"|(?P<semicolon>D\d+;\d+)(?![\d:])"
    r"|(?P<id>D\d+:\d+)"
    r"|(?<![\w:])(?P<bare>\d+:\d+)"
)
_SEPARATORS = re.compile(r"[;,.\s]+")
_DAY_NUMBER = re.compile(r"D(\d+):(\d+)")


@dataclass
class EvidenceParse:
    raw: str
    resolved: list[str]  # known local_ids, file order, no duplicates
    unresolved: list[str]  # parts that name no message of the file, in written order
    oddities: list[str]  # forms read with a guess


def parse_evidence(raw: str, known_ids: Sequence[str]) -> EvidenceParse:
    """Resolve one evidence string against the chat's local_ids (file order). Never raises."""
    return _parse(raw, known_ids, {local_id: i for i, local_id in enumerate(known_ids)})


def gold_qa_frame(chat: Chat) -> pl.DataFrame:
    """One row per ``qa`` entry (schema.GOLD_QA); question_id uses the 0-based qa index."""
    known_ids = chat.local_ids
    position = {local_id: i for i, local_id in enumerate(known_ids)}
    rows: dict[str, list] = {column: [] for column in schema.GOLD_QA}
    for index, entry in enumerate(chat.qa):
        where = f"{chat.path.name}: qa[{index}]"
        question = entry.get("question")
        if not isinstance(question, str):
            raise ChatFormatError(f"{where}.question missing or not a string ({question!r})")
        category = entry.get("category")
        if isinstance(category, bool) or not isinstance(category, int | str) or not str(category).isdigit():
            raise ChatFormatError(f"{where}.category must be an integer, got {category!r}")
        # LoCoMo's adversarial questions (category 5) carry "adversarial_answer" instead.
        answer = entry["answer"] if "answer" in entry else entry.get("adversarial_answer", "")
        evidence = entry.get("evidence") or []
        oddities = []
        if isinstance(evidence, str):
            oddities.append(f"evidence is one string, not a list: {evidence!r:.80}")
            evidence = [evidence]
        if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
            raise ChatFormatError(f"{where}.evidence must be a list of strings, got {evidence!r:.200}")

        parses = [_parse(raw, known_ids, position) for raw in evidence]
        gold = sorted({i for p in parses for i in p.resolved}, key=position.__getitem__)
        unresolved = list(dict.fromkeys(part for p in parses for part in p.unresolved))
        oddities += [odd for p in parses for odd in p.oddities]

        rows["question_id"].append(f"{chat.chat_file}/q{index:03d}")
        rows["chat_file"].append(chat.chat_file)
        rows["question"].append(question)
        rows["answer"].append(_answer_text(answer))
        rows["category"].append(int(category))
        rows["evidence_raw"].append(evidence)
        rows["gold_ids"].append(gold)
        rows["unresolved"].append(unresolved)
        rows["oddities"].append(oddities)
    return pl.DataFrame(rows, schema=schema.GOLD_QA)


def _answer_text(answer: object) -> str:
    if answer is None:
        return ""
    if isinstance(answer, list):
        return ", ".join(str(a) for a in answer)
    return str(answer)


def _parse(raw: str, known_ids: Sequence[str], position: dict[str, int]) -> EvidenceParse:
    text = re.sub(r"D\s+(?=\d)", "D", raw)
    text = re.sub(r"\s*([:;\-])\s*", r"\1", text)

    resolved: set[str] = set()
    unresolved: list[str] = []
    oddities: list[str] = []

    def take(local_id: str, written: str) -> None:
        if local_id in position:
            resolved.add(local_id)
        else:
            unresolved.append(written)

    def leftovers(chunk: str) -> None:
        unresolved.extend(p for p in _SEPARATORS.split(chunk) if any(c.isalnum() for c in p))

    end = 0
    for match in _PART.finditer(text):
        leftovers(text[end : match.start()])
        end = match.end()
        written = match.group()
        if match["range"]:
            first, last = written.split("-")
            if first in position and last in position and position[first] > position[last]:
                oddities.append(f"range {written} written backwards: read as {last}-{first}")
            resolved_range = _expand_range(first, last, known_ids, position)
            if resolved_range is None:
                unresolved.append(written)
            else:
                resolved.update(resolved_range)
                unresolved.extend(i for i in (first, last) if i not in position)
        elif match["semicolon"]:
            take(written.replace(";", ":"), written)
        elif match["bare"]:
            take("D" + written, written)
        else:
            take(written, written)
    leftovers(text[end:])

    return EvidenceParse(
        raw=raw,
        resolved=sorted(resolved, key=position.__getitem__),
        unresolved=list(dict.fromkeys(unresolved)),
        oddities=oddities,
    )


def _expand_range(first: str, last: str, known_ids: Sequence[str], position: dict[str, int]) -> list[str] | None:
    if first in position and last in position:
        lo, hi = sorted((position[first], position[last]))
        return list(known_ids[lo : hi + 1])
    (day_a, n_a), (day_b, n_b) = (map(int, _DAY_NUMBER.fullmatch(i).groups()) for i in (first, last))
    if day_a != day_b:
        return None
    lo, hi = sorted((n_a, n_b))
    found = []
    for local_id in known_ids:
        m = _DAY_NUMBER.fullmatch(local_id)
        if m and int(m.group(1)) == day_a and lo <= int(m.group(2)) <= hi:
            found.append(local_id)
    return found
