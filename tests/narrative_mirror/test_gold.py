import json
import re
from pathlib import Path

import polars as pl
import pytest

from narrative_mirror import schema
from narrative_mirror.chats import ChatFormatError, load_chat
from narrative_mirror.gold import gold_qa_frame, parse_evidence

REALTALK_DIR = Path("/work/shared/datasets/realtalk")


def day(d: int, *numbers: int) -> list[str]:
    return [f"D{d}:{n}" for n in numbers]


# File order of a made-up chat holding every id the cases below cite (D18:8, D9:99, D23:29 and
# D12:6 deliberately absent).
KNOWN = (
    day(2, 18)
    + day(5, 3, 12, 16)
    + day(11, 17, 20, 22)
    + day(12, 1, 2, 3, 4, 5, 7, 11, 12, 13, 14)
    + day(13, 4, 25, 26, 27, 28, 29, 30, 31, 32, 33, 45)
    + day(14, 4)
    + day(15, 5, 6)
    + day(16, 1)
    + day(17, 8, 17, 39)
    + day(18, 6, 7)
    + day(20, 19)
    + day(23, 28)
)

# Every messy form found in the ten RealTalk files' qa[*].evidence, with the exact reading.
CASES = [
    ("D5:3", day(5, 3), []),
    ("D12:3-D12:5", day(12, 3, 4, 5), []),
    ("D12:11-D12:14;D13:25-D13:33", day(12, 11, 12, 13, 14) + day(13, 25, 26, 27, 28, 29, 30, 31, 32, 33), []),
    ("D15:5-D15:6;D12:1-D12:2", day(12, 1, 2) + day(15, 5, 6), []),
    ("D18:6-D18:8", day(18, 6, 7), ["D18:8"]),  # end missing: ids of that day between the numbers
    ("D12:5-D12:3", day(12, 3, 4, 5), []),  # reversed
    ("D12:4-D13:4", day(12, 4, 5, 7, 11, 12, 13, 14) + day(13, 4), []),  # across days: file order
    ("D12:5-D12:6", day(12, 5), ["D12:6"]),
    ("D12:4-D14:9", [], ["D12:4-D14:9"]),  # across days with an end missing: no safe reading
    ("D5:12;D5:16", day(5, 12, 16), []),
    ("D11:17; D16:1", day(11, 17) + day(16, 1), []),
    ("D11:20; D11:22; D12:1", day(11, 20, 22) + day(12, 1), []),
    ("D17:17; D17:8", day(17, 8, 17), []),  # output in file order
    ("D13:4. D14:4", day(13, 4) + day(14, 4), []),
    ("D5:3.", day(5, 3), []),
    ("D 2:18", day(2, 18), []),
    ("D17;39", day(17, 39), []),  # ';' typed for ':'
    ("D13:45:D20:19", day(13, 45) + day(20, 19), []),  # ':' typed for a separator
    ("23:28", day(23, 28), []),  # 'D' left out
    ("23:29", [], ["23:29"]),
    ("", [], []),
    ("D:56", [], ["D:56"]),
    ("D58", [], ["D58"]),
    ("D9:99", [], ["D9:99"]),  # an id of a removed message
    ("D5:3, D9:99, D5:3", day(5, 3), ["D9:99"]),
]


@pytest.mark.parametrize("raw, resolved, unresolved", CASES, ids=[repr(c[0]) for c in CASES])
def test_parse_evidence_forms(raw, resolved, unresolved):
    parsed = parse_evidence(raw, KNOWN)
    assert (parsed.raw, parsed.resolved, parsed.unresolved) == (raw, resolved, unresolved)


@pytest.mark.parametrize(
    "raw",
    ["-", ":", ";;", "D", "D1:1--D1:2", "D1:99999999-D1:1", "\x00🙂", "D" * 5000, "D12:3-D12:999999999999", " . , ; "],
)
def test_parse_evidence_never_raises_and_resolves_only_known_ids(raw):
    parsed = parse_evidence(raw, KNOWN)
    assert set(parsed.resolved) <= set(KNOWN)


def test_gold_qa_frame(tmp_path):
    messages = [
        {
            "clean_text": f"m{i}",
            "speaker": "A",
            "date_time": "01.03.2024, 10:00:00",
            "img_file": [],
            "img_url": [],
            "dia_id": local_id,
        }
        for i, local_id in enumerate(["D1:1", "D1:2", "D2:1", "D2:2"])
    ]
    qa = [
        {"question": "Q0?", "answer": "text", "evidence": ["D2:1", "D1:2-D1:1", "D1:2"], "category": 1},
        {"question": "Q1?", "answer": 3, "evidence": ["D2:2", "D7:7", ""], "category": 2},
        {"question": "Q2?", "answer": ["x", "y"], "evidence": "D1:2.", "category": 3},
    ]
    path = tmp_path / "Small_Chat.json"
    path.write_text(json.dumps({"session_1": messages[:2], "session_2": messages[2:], "qa": qa}), encoding="utf-8")
    frame = gold_qa_frame(load_chat(path))
    assert dict(frame.schema) == schema.GOLD_QA
    assert frame.to_dicts() == [
        {
            "question_id": "Small_Chat/q000",
            "chat_file": "Small_Chat",
            "question": "Q0?",
            "answer": "text",
            "category": 1,
            "evidence_raw": ["D2:1", "D1:2-D1:1", "D1:2"],
            "gold_ids": ["D1:1", "D1:2", "D2:1"],
            "unresolved": [],
            "oddities": ["range D1:2-D1:1 written backwards: read as D1:1-D1:2"],
        },
        {
            "question_id": "Small_Chat/q001",
            "chat_file": "Small_Chat",
            "question": "Q1?",
            "answer": "3",
            "category": 2,
            "evidence_raw": ["D2:2", "D7:7", ""],
            "gold_ids": ["D2:2"],
            "unresolved": ["D7:7"],
            "oddities": [],
        },
        {
            "question_id": "Small_Chat/q002",
            "chat_file": "Small_Chat",
            "question": "Q2?",
            "answer": "x, y",
            "category": 3,
            "evidence_raw": ["D1:2."],
            "gold_ids": ["D1:2"],
            "unresolved": [],
            "oddities": ["evidence is one string, not a list: 'D1:2.'"],
        },
    ]


def test_gold_qa_frame_locomo_adversarial_answer(tmp_path):
    data = {
        "conversation": {
            "speaker_a": "A",
            "speaker_b": "B",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}],
        },
        "qa": [{"question": "What did B paint?", "adversarial_answer": "a lake", "evidence": ["D1:1"], "category": 5}],
    }
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    row = gold_qa_frame(load_chat(path)).row(0, named=True)
    assert (row["answer"], row["category"], row["gold_ids"]) == ("a lake", 5, ["D1:1"])


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"answer": "a", "evidence": [], "category": 1}, r"c\.json: qa\[0\]\.question missing or not a string"),
        (
            {"question": "?", "answer": "a", "evidence": [], "category": "one"},
            r"c\.json: qa\[0\]\.category must be an integer",
        ),
        (
            {"question": "?", "answer": "a", "evidence": ["D1:1", 4], "category": 1},
            r"c\.json: qa\[0\]\.evidence must be a list of strings",
        ),
    ],
)
def test_gold_qa_frame_bad_entries(tmp_path, entry, message):
    path = tmp_path / "c.json"
    path.write_text(
        json.dumps(
            {
                "session_1": [
                    {"clean_text": "x", "speaker": "A", "date_time": "01.03.2024, 10:00:00", "dia_id": "D1:1"}
                ],
                "qa": [entry],
            }
        ),
        encoding="utf-8",
    )
    with pytest.raises(ChatFormatError, match=message):
        gold_qa_frame(load_chat(path))


# Unresolved parts per file (measured on the data; ids of removed messages plus D:56, D58, 23:29).
REALTALK_UNRESOLVED = {
    "Chat_1_Emi_Elise": 28,
    "Chat_2_Kevin_Elise": 3,
    "Chat_3_Kevin_Paola": 2,
    "Chat_4_Emi_Paola": 1,
    "Chat_5_Nicolas_Nebraas": 15,
    "Chat_6_Vanessa_Nicolas": 0,
    "Chat_7_Nebraas_Vanessa": 5,
    "Chat_8_Akib_Muhhamed": 45,
    "Chat_9_Fahim_Akib": 38,
    "Chat_10_Fahim_Muhhamed": 1,
}


@pytest.mark.skipif(not REALTALK_DIR.is_dir(), reason="RealTalk data set not on this machine")
def test_realtalk_gold():
    frames, messages = [], 0
    for path in sorted(REALTALK_DIR.glob("*.json")):
        chat = load_chat(path)
        frame = gold_qa_frame(chat)
        messages += chat.messages.height
        known = set(chat.local_ids)
        for raw_list, gold in zip(frame["evidence_raw"], frame["gold_ids"]):
            for raw in raw_list:
                if re.fullmatch(r"D\d+:\d+", raw) and raw in known:
                    assert raw in gold
        frames.append(frame)
    gold = pl.concat(frames)
    unresolved = {chat_file: group["unresolved"].list.len().sum() for (chat_file,), group in gold.group_by("chat_file")}
    print("unresolved evidence parts per file:", unresolved)
    assert messages == 8944
    assert gold.height == 728
    assert gold["question_id"].n_unique() == 728
    assert gold["category"].value_counts().sort("category").rows() == [(1, 301), (2, 319), (3, 108)]
    assert gold["evidence_raw"].list.len().sum() == 1742
    assert gold["gold_ids"].list.len().sum() == 1694
    assert unresolved == REALTALK_UNRESOLVED
    assert sorted(p for parts in gold["unresolved"] for p in parts if not re.fullmatch(r"D\d+:\d+", p)) == [
        "23:29",
        "D58",
        "D:56",
    ]
