import json
import re
import time
from datetime import datetime
from pathlib import Path

import pytest

from narrative_mirror import schema
from narrative_mirror.chats import MAX_TEXT_CHARS, ChatFormatError, load_chat

REALTALK_DIR = Path("/work/shared/datasets/realtalk")


def realtalk_message(dia_id, text, speaker="Ana", date_time="01.03.2024, 10:00:00", **extra):
    return {
        "clean_text": text,
        "speaker": speaker,
        "date_time": date_time,
        "img_file": [],
        "img_url": [],
        "dia_id": dia_id,
        **extra,
    }


def write_json(tmp_path: Path, name: str, data) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_realtalk_file_order_ids_times_images(tmp_path):
    # session_10 is written before session_2 and must still come after it; the D number is a
    # day, so session_2 continuing day D1 keeps its ids.
    data = {
        "name": {"speaker_1": "Ana", "speaker_2": "Ben"},
        "session_10": [realtalk_message("D3:1", "late", "Ben", "05.03.2024, 09:00:00")],
        "session_1": [
            realtalk_message("D1:1", "hi", "Ana", "01.03.2024, 10:00:00"),
            realtalk_message("D1:2", "look", "Ben", "01.03.2024, 10:01:30", img_file=["p.jpg"], blip_caption="a dog"),
        ],
        "session_2": [
            realtalk_message(
                "D 1:3", "still day one", "Ana", "01.03.2024, 23:59:59", img_url=["https://example.org/x.jpg"]
            )
        ],
        "session_1_date_time": "01.03.2024, 10:00:00",
        "events_session_1": {"agent_a": []},
    }
    chat = load_chat(write_json(tmp_path, "Two_Friends.json", data))
    m = chat.messages
    assert chat.format == "realtalk"
    assert chat.chat_file == "Two_Friends"
    assert chat.speakers == ["Ana", "Ben"]
    assert chat.qa == []
    assert dict(m.schema) == schema.MESSAGE_RECORD  # the record every format shares
    assert m["message_id"].to_list() == ["Two_Friends/D1:1", "Two_Friends/D1:2", "Two_Friends/D1:3", "Two_Friends/D3:1"]
    assert m["position"].to_list() == [0, 1, 2, 3]
    assert m["session"].to_list() == [1, 1, 2, 10]
    assert m["timestamp"].to_list()[1] == datetime(2024, 3, 1, 10, 1, 30)
    assert m["image_urls"].to_list() == [[], ["p.jpg"], ["https://example.org/x.jpg"], []]
    assert m["image_caption"].to_list() == ["", "a dog", "", ""]
    # No zone, replies, edits or system lines in RealTalk; images are photo attachments.
    assert m["utc_time"].to_list() == [None] * 4 and m["reply_to"].to_list() == [None] * 4
    assert m["tz"].to_list() == [""] * 4 and m["system"].to_list() == [False] * 4
    assert m["attachments"].to_list()[1] == [{"kind": "photo", "name": "p.jpg", "caption": "a dog"}]
    assert chat.notes == ["session_2[0].dia_id 'D 1:3' normalized to 'D1:3'"]


def test_chat_file_argument_overrides_stem(tmp_path):
    path = write_json(tmp_path, "x.json", {"session_1": [realtalk_message("D1:1", "hi")]})
    assert load_chat(path, chat_file="part_a").messages["message_id"].to_list() == ["part_a/D1:1"]


def test_empty_session_skipped_with_note_and_long_text_truncated(tmp_path):
    long_text = "a" * (MAX_TEXT_CHARS + 5)
    data = {
        "session_1": [realtalk_message("D1:1", long_text)],
        "session_2": [],
        "session_3": [realtalk_message("D2:1", "ok")],
    }
    chat = load_chat(write_json(tmp_path, "c.json", data))
    assert chat.messages["local_id"].to_list() == ["D1:1", "D2:1"]
    assert chat.messages["session"].to_list() == [1, 3]
    assert len(chat.messages["text"][0]) == MAX_TEXT_CHARS
    assert chat.notes == [
        f"session_1[0].text truncated from {MAX_TEXT_CHARS + 5} to {MAX_TEXT_CHARS} characters",
        "session_2: empty session skipped",
    ]


LOCOMO = {
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Caroline",
        "speaker_b": "Mel",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel!"},
            {
                "speaker": "Mel",
                "dia_id": "D1:2",
                "text": "Look at this",
                "img_url": ["https://example.org/p.jpg"],
                "blip_caption": "a photo of a cake",
            },
        ],
        "session_2_date_time": "10:37 am on 27 June, 2023",
        "session_2": [{"speaker": "Mel", "dia_id": "D2:1", "text": "Back from the trip"}],
    },
    "qa": [
        {"question": "When did Mel bake?", "answer": 2023, "evidence": ["D1:2"], "category": 2},
        {"question": "What did Caroline paint?", "adversarial_answer": "nothing", "evidence": ["D1:1"], "category": 5},
    ],
}


def test_locomo_format(tmp_path):
    chat = load_chat(write_json(tmp_path, "conv_x.json", LOCOMO))
    m = chat.messages
    assert chat.format == "locomo"
    assert chat.speakers == ["Caroline", "Mel"]
    assert m["local_id"].to_list() == ["D1:1", "D1:2", "D2:1"]
    assert m["session"].to_list() == [1, 1, 2]
    # One time per session: every message of the session gets it.
    assert m["timestamp"].to_list() == [
        datetime(2023, 5, 8, 13, 56),
        datetime(2023, 5, 8, 13, 56),
        datetime(2023, 6, 27, 10, 37),
    ]
    assert m["image_urls"].to_list() == [[], ["https://example.org/p.jpg"], []]
    assert m["image_caption"].to_list() == ["", "a photo of a cake", ""]
    assert len(chat.qa) == 2


def _message_list(*messages):
    return {"session_1": list(messages)}


BAD_CHATS = [
    ("malformed JSON", b'{"session_1": [', r"bad\.json: invalid JSON at line 1 column 16"),
    ("empty file", b"  \n", r"bad\.json: empty file"),
    (
        "not UTF-8",
        b'{"session_1": [{"clean_text": "caf\xe9"}]}',
        r"bad\.json: not UTF-8 text \(byte 0xe9 at offset 34\)",
    ),
    ("top-level list", [LOCOMO, LOCOMO], r"bad\.json: top level is a list of 2 items"),
    ("no session key", {"name": {"speaker_1": "A"}, "qa": []}, r"bad\.json: unknown chat format.*expected RealTalk"),
    ("session not a list", {"session_1": {"dia_id": "D1:1"}}, r"bad\.json: session_1 is dict; expected a list"),
    ("message not an object", _message_list("hi"), r"bad\.json: session_1\[0\] is str; expected an object"),
    (
        "text not a string",
        _message_list(realtalk_message("D1:1", 5)),
        r"bad\.json: session_1\[0\]\.clean_text is int; expected a string",
    ),
    (
        "missing text",
        _message_list({"speaker": "A", "dia_id": "D1:1", "date_time": "01.03.2024, 10:00:00"}),
        r"bad\.json: session_1\[0\]\.clean_text missing",
    ),
    (
        "missing dia_id",
        _message_list({"speaker": "A", "clean_text": "x", "date_time": "01.03.2024, 10:00:00"}),
        r"bad\.json: session_1\[0\]\.dia_id missing",
    ),
    (
        "duplicate dia_id",
        {
            "session_1": [realtalk_message("D1:1", "a"), realtalk_message("D1:2", "b")],
            "session_2": [realtalk_message("D 1:1", "c")],
        },
        r"bad\.json: duplicate dia_id 'D1:1' at session_1\[0\] \(position 0\) and session_2\[0\] \(position 2\)",
    ),
    (
        "unparseable date",
        _message_list(realtalk_message("D1:1", "a", date_time="31.02.2023, 10:00:00")),
        r"bad\.json: session_1\[0\]\.date_time: cannot parse '31\.02\.2023, 10:00:00' \(expected DD\.MM\.YYYY, HH:MM:SS\)",
    ),
    (
        "image list of numbers",
        _message_list(realtalk_message("D1:1", "a", img_url=[1])),
        r"bad\.json: session_1\[0\]\.img_url must be a list of strings",
    ),
    ("every session empty", {"session_1": [], "session_2": []}, r"bad\.json: every session is empty"),
    (
        "qa not a list",
        {"session_1": [realtalk_message("D1:1", "a")], "qa": {"question": "?"}},
        r"bad\.json: qa must be a list of objects",
    ),
    (
        "LoCoMo bad session date",
        {"conversation": {**LOCOMO["conversation"], "session_2_date_time": "yesterday"}},
        r"bad\.json: conversation\.session_2_date_time: cannot parse 'yesterday' \(expected like '1:56 pm on 8 May, 2023'\)",
    ),
    (
        "LoCoMo without sessions",
        {"conversation": {"speaker_a": "A", "speaker_b": "B"}},
        r"bad\.json: conversation\.session_N keys missing",
    ),
    ("nested too deeply", b"[" * 100_000 + b"]" * 100_000, r"bad\.json: JSON nested too deeply to read"),
    ("a null message", _message_list(None), r"bad\.json: session_1\[0\] is NoneType; expected an object"),
]


@pytest.mark.parametrize("content, message", [(c, m) for _, c, m in BAD_CHATS], ids=[n for n, _, _ in BAD_CHATS])
def test_bad_chat_files_name_file_and_field(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
    with pytest.raises(ChatFormatError, match=message):
        load_chat(path)


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(ChatFormatError, match=re.escape(str(tmp_path / "nope.json"))):
        load_chat(tmp_path / "nope.json")


@pytest.mark.skipif(not REALTALK_DIR.is_dir(), reason="RealTalk data set not on this machine")
def test_realtalk_files_load_fast_and_in_file_order():
    chats = [load_chat(p) for p in sorted(REALTALK_DIR.glob("*.json"))]
    assert len(chats) == 10
    assert sum(c.messages.height for c in chats) == 8944
    for chat in chats:
        m = chat.messages
        assert m["position"].to_list() == list(range(m.height))
        assert m["message_id"].n_unique() == m.height
        assert m["session"].is_sorted()
        assert chat.notes == []

    # The D number is the day: Chat_1's session 4 continues day 3.
    chat_1 = next(c for c in chats if c.chat_file == "Chat_1_Emi_Elise")
    first_of_session_4 = chat_1.messages.filter(chat_1.messages["session"] == 4).row(0, named=True)
    assert (first_of_session_4["local_id"], first_of_session_4["position"]) == ("D3:30", 107)
    # Most RealTalk photos are only in img_file, with a blip caption.
    assert chat_1.messages.filter(chat_1.messages["image_urls"].list.len() > 0).height == 32

    largest = REALTALK_DIR / "Chat_5_Nicolas_Nebraas.json"
    start = time.perf_counter()
    assert load_chat(largest).messages.height == 1548
    assert time.perf_counter() - start < 3.0  # ~0.2 s idle; 2 s seen with CI's other tests beside it
