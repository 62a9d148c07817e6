"""Writes small RealTalk-format chat files for tests."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path


def realtalk_chat(
    sessions: list[list[tuple[str, str]]],
    start: datetime = datetime(2024, 3, 1, 9, 0),
    qa: list[dict] | None = None,
    speakers: tuple[str, str] = ("Ana", "Ben"),
) -> dict:
    """``sessions`` = [[(speaker, text), ...], ...]; session i is day i+1, messages a minute apart."""
    chat: dict = {"name": {"speaker_1": speakers[0], "speaker_2": speakers[1]}}
    for s, msgs in enumerate(sessions, 1):
        day = start + timedelta(days=s - 1)
        chat[f"session_{s}"] = [
            {
                "clean_text": text,
                "speaker": speaker,
                "date_time": (day + timedelta(minutes=i)).strftime("%d.%m.%Y, %H:%M:%S"),
                "img_file": [],
                "img_url": [],
                "dia_id": f"D{s}:{i + 1}",
            }
            for i, (speaker, text) in enumerate(msgs)
        ]
        chat[f"session_{s}_date_time"] = day.strftime("%d.%m.%Y, %H:%M:%S")
    if qa is not None:
        chat["qa"] = qa
    return chat


def write_chat(folder: Path, name: str, chat: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(chat), encoding="utf-8")
    return path


def small_chat(qa: bool = True) -> dict:
    return realtalk_chat(
        [
            [
                ("Ana", "I start my new job at the bakery tomorrow"),
                ("Ben", "Good luck! Which bakery?"),
                ("Ana", "The one on Elm Street"),
                ("Ben", "Nice, I love their rye bread"),
            ],
            [
                ("Ana", "First day at the bakery went great"),
                ("Ben", "Told you!"),
                ("Ana", "I baked forty loaves of rye"),
                ("Ben", "Save me one"),
            ],
        ],
        qa=[
            {
                "question": "Where does Ana work?",
                "answer": "A bakery on Elm Street",
                "evidence": ["D1:1", "D1:3"],
                "category": 1,
            },
            {"question": "How many loaves did Ana bake?", "answer": 40, "evidence": ["D2:3.", "D9:9"], "category": 2},
        ]
        if qa
        else None,
    )
