import json
from pathlib import Path

import pytest

from narrative_mirror import schema
from narrative_mirror.arcs import ArcCaseError, arcs_file_for, load_arc_cases
from narrative_mirror.chats import load_chat

REALTALK_DIR = Path("/work/shared/datasets/realtalk")
REALTALK_ARCS_DIR = Path("/work/shared/datasets/realtalk_arcs")


@pytest.fixture
def chat(tmp_path):
    ids = ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
    messages = [
        {"clean_text": f"m{i}", "speaker": "A", "date_time": "01.03.2024, 10:00:00", "dia_id": local_id}
        for i, local_id in enumerate(ids)
    ]
    path = tmp_path / "Tiny.json"
    path.write_text(json.dumps({"session_1": messages[:3], "session_2": messages[3:]}), encoding="utf-8")
    return load_chat(path)


def phase(name, *evidence, summary="s"):
    return {"name": name, "summary": summary, "evidence": list(evidence)}


def case(case_id="Tiny/arc-01", phases=None, **fields):
    return {
        "id": case_id,
        "query": "How did it go?",
        "subject": "A",
        "phases": [phase("start", "D1:3", "D1:1"), phase("end", "D 2:2")] if phases is None else phases,
        **fields,
    }


def write_arcs(tmp_path, data) -> Path:
    path = tmp_path / "Tiny.arcs.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_load_arc_cases(tmp_path, chat):
    path = write_arcs(
        tmp_path, {"chat": "Tiny", "cases": [case(), case("Tiny/arc-02", [phase("only", "D2:1", summary="x")])]}
    )
    frame = load_arc_cases(path, chat.messages)
    assert dict(frame.schema) == schema.ARC_CASES
    assert frame.to_dicts() == [
        {
            "case_id": "Tiny/arc-01",
            "chat_file": "Tiny",
            "query": "How did it go?",
            "subject": "A",
            "phase_names": ["start", "end"],
            "phase_summaries": ["s", "s"],
            "phase_evidence": [["D1:1", "D1:3"], ["D2:2"]],
        },  # file order; whitespace normalized
        {
            "case_id": "Tiny/arc-02",
            "chat_file": "Tiny",
            "query": "How did it go?",
            "subject": "A",
            "phase_names": ["only"],
            "phase_summaries": ["x"],
            "phase_evidence": [["D2:1"]],
        },
    ]


BAD_ARCS = [
    (
        "id missing from chat",
        {"chat": "Tiny", "cases": [case(phases=[phase("p", "D1:1", "D9:9")])]},
        r"Tiny\.arcs\.json: case Tiny/arc-01: phase 'p': evidence id 'D9:9' is not in chat Tiny",
    ),
    (
        "no phases",
        {"chat": "Tiny", "cases": [case(phases=[])]},
        r"Tiny\.arcs\.json: case Tiny/arc-01: phases must be a non-empty list",
    ),
    (
        "phase without evidence",
        {"chat": "Tiny", "cases": [case(phases=[phase("p")])]},
        r"case Tiny/arc-01: phase 'p': evidence must be a non-empty list",
    ),
    (
        "id in two phases",
        {"chat": "Tiny", "cases": [case(phases=[phase("a", "D1:1"), phase("b", "D1:2", "D1:1")])]},
        r"case Tiny/arc-01: evidence id 'D1:1' is in phase 'a' and phase 'b'",
    ),
    ("duplicate case id", {"chat": "Tiny", "cases": [case(), case()]}, r"case id 'Tiny/arc-01' used twice"),
    (
        "case without id",
        {"chat": "Tiny", "cases": [{"query": "q", "subject": "A", "phases": []}]},
        r"Tiny\.arcs\.json: cases\[0\]\.id missing",
    ),
    ("empty query", {"chat": "Tiny", "cases": [case(query=" ")]}, r"case Tiny/arc-01: query missing or empty"),
    (
        "other chat",
        {"chat": "Other", "cases": [case()]},
        r"written for chat 'Other' but the messages are of \['Tiny'\]",
    ),
    ("cases not a list", {"chat": "Tiny", "cases": {}}, r"Tiny\.arcs\.json: expected an object with a 'cases' list"),
    ("malformed JSON", '{"chat": "Tiny", ', r"Tiny\.arcs\.json: invalid JSON"),
]


@pytest.mark.parametrize("data, message", [(d, m) for _, d, m in BAD_ARCS], ids=[n for n, _, _ in BAD_ARCS])
def test_bad_arc_files(tmp_path, chat, data, message):
    with pytest.raises(ArcCaseError, match=message):
        load_arc_cases(write_arcs(tmp_path, data), chat.messages)


def test_arcs_file_for(tmp_path):
    (tmp_path / "Tiny.arcs.json").write_text("{}", encoding="utf-8")
    assert arcs_file_for(tmp_path, "Tiny") == tmp_path / "Tiny.arcs.json"
    assert arcs_file_for(tmp_path, "Other") is None
    assert arcs_file_for(None, "Tiny") is None


@pytest.mark.skipif(not REALTALK_ARCS_DIR.is_dir(), reason="RealTalk ARC cases not on this machine")
def test_realtalk_arc_files_validate():
    cases = phases = ids = 0
    for chat_path in sorted(REALTALK_DIR.glob("*.json")):
        chat = load_chat(chat_path)
        frame = load_arc_cases(arcs_file_for(REALTALK_ARCS_DIR, chat.chat_file), chat.messages)
        assert frame["case_id"].str.starts_with(f"{chat.chat_file}/").all()
        cases += frame.height
        phases += frame["phase_names"].list.len().sum()
        ids += sum(len(p) for row in frame["phase_evidence"] for p in row)
    assert (cases, phases, ids) == (60, 263, 760)
