"""Narrative ARC cases: stories across sessions, each phase with the messages that show it.

File format (``<chat_file>.arcs.json``, see the RealTalk arcs README)::

    {"chat": "<chat_file>", "cases": [{"id", "query", "subject",
      "phases": [{"name", "summary", "evidence": ["D4:2", ...]}, ...]}]}

Evidence ids are matched against the chat's local_ids after removing whitespace (the same
normalization ``dia_id`` gets); every phase needs at least one id and an id belongs to one
phase only. Phase evidence is returned in file order.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from narrative_mirror import schema
from narrative_mirror.chats import ChatFormatError, read_json_file


class ArcCaseError(ValueError):
    """An ARC file that cannot be used; the message names the file, the case and the field."""


def arcs_file_for(arcs_dir: Path | None, chat_file: str) -> Path | None:
    """``<arcs_dir>/<chat_file>.arcs.json`` if it exists, else None."""
    if arcs_dir is None:
        return None
    path = Path(arcs_dir) / f"{chat_file}.arcs.json"
    return path if path.is_file() else None


def load_arc_cases(path: Path, messages: pl.DataFrame) -> pl.DataFrame:
    """Validate the ARC file ``path`` against the chat's MESSAGES frame; schema.ARC_CASES."""
    path = Path(path)
    where = path.name
    try:
        data = read_json_file(path)
    except ChatFormatError as exc:
        raise ArcCaseError(str(exc)) from exc
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise ArcCaseError(f"{where}: expected an object with a 'cases' list")

    chat_files = messages["chat_file"].unique().to_list()
    chat_file = data.get("chat")
    if not isinstance(chat_file, str):
        raise ArcCaseError(f"{where}: 'chat' missing or not a string")
    if chat_files and chat_files != [chat_file]:
        raise ArcCaseError(f"{where}: written for chat {chat_file!r} but the messages are of {chat_files}")

    position = {local_id: i for i, local_id in enumerate(messages["local_id"].to_list())}
    rows: dict[str, list] = {column: [] for column in schema.ARC_CASES}
    case_ids: set[str] = set()
    for index, case in enumerate(data["cases"]):
        if not isinstance(case, dict):
            raise ArcCaseError(f"{where}: cases[{index}] is {type(case).__name__}; expected an object")
        case_id = case.get("id")
        if not isinstance(case_id, str) or not case_id:
            raise ArcCaseError(f"{where}: cases[{index}].id missing or not a string")
        if case_id in case_ids:
            raise ArcCaseError(f"{where}: case id {case_id!r} used twice")
        case_ids.add(case_id)
        at = f"{where}: case {case_id}"
        for key in ("query", "subject"):
            if not isinstance(case.get(key), str) or not case[key].strip():
                raise ArcCaseError(f"{at}: {key} missing or empty")
        phases = case.get("phases")
        if not isinstance(phases, list) or not phases:
            raise ArcCaseError(f"{at}: phases must be a non-empty list")

        names, summaries, evidence = [], [], []
        phase_of: dict[str, str] = {}
        for p, phase in enumerate(phases):
            if not isinstance(phase, dict):
                raise ArcCaseError(f"{at}: phases[{p}] is {type(phase).__name__}; expected an object")
            name = phase.get("name")
            if not isinstance(name, str) or not name.strip():
                raise ArcCaseError(f"{at}: phases[{p}].name missing or empty")
            summary = phase.get("summary", "")
            if not isinstance(summary, str):
                raise ArcCaseError(f"{at}: phase {name!r}: summary is not a string")
            ids = phase.get("evidence")
            if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
                raise ArcCaseError(f"{at}: phase {name!r}: evidence must be a non-empty list of id strings")
            local_ids = []
            for raw_id in ids:
                local_id = re.sub(r"\s+", "", raw_id)
                if local_id not in position:
                    raise ArcCaseError(f"{at}: phase {name!r}: evidence id {raw_id!r} is not in chat {chat_file}")
                if local_id in phase_of:
                    raise ArcCaseError(
                        f"{at}: evidence id {local_id!r} is in phase {phase_of[local_id]!r} and phase {name!r}"
                    )
                phase_of[local_id] = name
                local_ids.append(local_id)
            names.append(name)
            summaries.append(summary)
            evidence.append(sorted(local_ids, key=position.__getitem__))

        rows["case_id"].append(case_id)
        rows["chat_file"].append(chat_file)
        rows["query"].append(case["query"])
        rows["subject"].append(case["subject"])
        rows["phase_names"].append(names)
        rows["phase_summaries"].append(summaries)
        rows["phase_evidence"].append(evidence)
    return pl.DataFrame(rows, schema=schema.ARC_CASES)
