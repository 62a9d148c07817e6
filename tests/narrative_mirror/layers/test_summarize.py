from __future__ import annotations

import json

import pytest
from llm_servers import fault_server, llama_server

from narrative_mirror import settings
from narrative_mirror.layers import ExtractiveSummarizer, LLMSummarizer
from narrative_mirror.layers.params import SummaryParams, section
from narrative_mirror.llm import DATA_BEGIN, DATA_BLOCK_NOTICE, DATA_END, LLMClient

BREAD = [
    "Ana: We baked sourdough bread today",
    "Ben: Sourdough bread needs a starter",
    "Ana: The starter is bubbly",
    "Ben: lol",
]
EXTRACTIVE_BREAD = (
    "bread, sourdough, starter",
    "Ana: We baked sourdough bread today … Ben: Sourdough bread needs a starter",
)


@pytest.fixture
def summary_params(layers_config) -> SummaryParams:
    return section(layers_config, "summary", SummaryParams)


def test_extractive_block_summary(summary_params):
    # Terms in most items: bread, sourdough, starter (2 each); speakers are ignored.
    # Centrality: item 1 shares 3 terms (3/sqrt 4 = 1.5), item 0 shares 2 (2/sqrt 3 = 1.15).
    assert ExtractiveSummarizer(summary_params).summarize("block", BREAD) == EXTRACTIVE_BREAD


def test_extractive_thread_summary_keeps_item_text(summary_params):
    items = [
        "2024-05-01 pasta, dough: made pasta",
        "2024-05-02 pasta, knead: sticky pasta dough",
        "2024-05-03 dog: vet visit",
    ]
    title, summary = ExtractiveSummarizer(summary_params).summarize("thread", items)
    assert title.startswith("pasta, dough")
    assert summary == "2024-05-01 pasta, dough: made pasta … 2024-05-02 pasta, knead: sticky pasta dough"


def test_extractive_caps_lengths(layers_config):
    config = dict(layers_config, summary=dict(layers_config["summary"], item_max_chars=20, summary_items=1))
    params = section(config, "summary", SummaryParams)
    label, summary = ExtractiveSummarizer(params).summarize("block", ["Ana: " + "word " * 50])
    assert label == "word"
    assert summary == "Ana: word word word…"


def test_bad_calls(summary_params):
    with pytest.raises(ValueError, match="kind must be one of"):
        ExtractiveSummarizer(summary_params).summarize("chapter", BREAD)
    with pytest.raises(ValueError, match="no items"):
        ExtractiveSummarizer(summary_params).summarize("block", [])


def test_llm_summary_sends_chat_as_data(summary_params):
    answer = {"label": "Sourdough baking", "summary": "Ana baked sourdough; Ben says it needs a starter."}
    with fault_server("ok_json", content=answer) as server:
        summarizer = LLMSummarizer(LLMClient(server.settings()), ExtractiveSummarizer(summary_params))
        assert summarizer.summarize("block", BREAD) == (answer["label"], answer["summary"])
    assert (summarizer.calls, summarizer.fallbacks) == (1, 0)
    [request] = server.chat_requests
    system, user = request["messages"][0]["content"], request["messages"][1]["content"]
    assert system.startswith(settings.load_prompt("block_summary").strip())
    assert system.endswith(DATA_BLOCK_NOTICE)
    assert request["response_format"] == {"type": "json_object"}
    lines = user.splitlines()
    assert lines[0] == DATA_BEGIN and lines[-1] == DATA_END
    assert json.loads(lines[1]) == {"id": "1", "speaker": "Ana", "text": "We baked sourdough bread today"}
    assert len(lines) == len(BREAD) + 2


def test_llm_thread_prompt(summary_params):
    answer = {"label": "Pasta story", "summary": "From first pasta to a better dough."}
    with fault_server("ok_json", content=answer) as server:
        summarizer = LLMSummarizer(LLMClient(server.settings()), ExtractiveSummarizer(summary_params))
        assert summarizer.summarize("thread", ["2024-05-01 pasta: made pasta"]) == ("Pasta story", answer["summary"])
    system = server.chat_requests[0]["messages"][0]["content"]
    assert system.startswith(settings.load_prompt("thread_summary").strip())
    data_line = json.loads(server.chat_requests[0]["messages"][1]["content"].splitlines()[1])
    assert data_line == {"id": "1", "speaker": "", "text": "2024-05-01 pasta: made pasta"}


@pytest.mark.parametrize(
    ("mode", "content"),
    [
        ("http_500", None),
        ("malformed", None),
        ("malformed", {"label": "only a label"}),
        ("ok_json", {"label": "", "summary": "empty label"}),
    ],
)
def test_llm_failure_falls_back_to_extractive(summary_params, mode, content):
    with fault_server(mode, content=content) as server:
        summarizer = LLMSummarizer(LLMClient(server.settings(max_retries=0)), ExtractiveSummarizer(summary_params))
        assert summarizer.summarize("block", BREAD) == EXTRACTIVE_BREAD
    assert (summarizer.calls, summarizer.fallbacks) == (1, 1)
    assert summarizer.last_error and "LLM" in summarizer.last_error


def test_llm_answer_is_capped(summary_params):
    answer = {"label": "L" * 500, "summary": "S " * 1000}
    with fault_server("ok_json", content=answer) as server:
        label, summary = LLMSummarizer(LLMClient(server.settings())).summarize("block", BREAD)
    assert len(label) <= summary_params.label_max_chars and len(summary) <= summary_params.summary_max_chars


@pytest.mark.llm_server
def test_llm_summary_against_llama_cpp(summary_params):
    with llama_server() as llm_settings:
        client = LLMClient(llm_settings)
        summarizer = LLMSummarizer(client, ExtractiveSummarizer(summary_params))
        label, summary = summarizer.summarize("block", BREAD)
    # SmolLM2 is weak: either it answered the JSON object or the fallback took over, never both.
    assert client.calls == 1 and summarizer.calls == 1
    assert label and summary
    assert (summarizer.fallbacks == 1) == ((label, summary) == EXTRACTIVE_BREAD)


def test_the_fallback_log_line_escapes_chat_and_llm_text(summary_params, caplog):
    from narrative_mirror.llm import LLMError

    hostile = "\x1b]0;pwned\x07\x1b[2J\rHACKED \u202etxt.exe"

    class EchoingServer:  # a server (or proxy) whose 4xx body echoes the chat text it was sent
        def complete_json(self, system, user, schema):
            raise LLMError("http", f"HTTP 400 from test: {hostile}")

    summarizer = LLMSummarizer(EchoingServer(), ExtractiveSummarizer(summary_params))
    with caplog.at_level("WARNING", logger="narrative_mirror.layers.summarize"):
        assert summarizer.summarize("block", BREAD) == EXTRACTIVE_BREAD
    [line] = [r.getMessage() for r in caplog.records if "extractive fallback" in r.getMessage()]
    assert not any(c in line for c in "\x1b\x07\r\u202e")
    assert line.endswith("HACKED \\u202etxt.exe")  # shown as visible escapes
