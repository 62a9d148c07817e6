"""config/agent.toml is where the agent's tuned values come from: the code uses its values, an
override folder (NM_CONFIG_DIR) changes them, and a missing or mistyped setting fails by name."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from datetime import datetime
from pathlib import Path

import pytest

from narrative_mirror import settings
from narrative_mirror.agent import answer, grading, narrative, search_nodes, slots, state
from narrative_mirror.agent.config import _validated, agent_config, validate
from narrative_mirror.agent.profiles import get_profile, profiles
from narrative_mirror.retrieval.records import ChatMessage

ROOT = Path(__file__).resolve().parents[3]


def packaged() -> dict:
    return tomllib.loads((settings.DEFAULT_CONFIG_DIR / "agent.toml").read_text(encoding="utf-8"))


@pytest.fixture
def fresh_config():
    """agent_config() re-read for the test, and again (the packaged file) after it."""
    _validated.cache_clear()
    yield
    _validated.cache_clear()


def test_the_code_uses_the_values_of_agent_toml():
    toml = packaged()
    selection, narrative_cfg = toml["selection"], toml["narrative"]
    assert (
        state.SELECT_RELATIVE_SCORE,
        state.SELECT_MIN_GRADE,
        state.COVER_MIN_GRADE,
        state.VARIANT_WEIGHT,
        state.SPAN_BLOCK_RELATIVE,
        search_nodes.LEAF_CONTEXT,
    ) == (
        selection["relative_score"],
        selection["min_grade"],
        selection["cover_min_grade"],
        selection["variant_weight"],
        selection["span_block_relative"],
        selection["leaf_context"],
    )
    assert (grading.SCORE_WEIGHT, grading.TARGET_WEIGHT, grading.MUST_HAVE_MIN_GRADE) == tuple(toml["grading"].values())
    assert (
        answer.SUPPORT_MIN,
        answer.RELEVANCE_MIN,
        slots.SPAN_WORDS,
        answer.LOOK_AT,
        answer.LIST_MESSAGES,
        slots.ASKING_PENALTY,
    ) == tuple(toml["answer"].values())
    assert (
        narrative.MIN_IDS,
        narrative.MAX_IDS,
        narrative.MAX_PHASES,
        narrative.PHASE_GAP.total_seconds() / 3600,
        narrative.STORY_IDS,
        narrative.PREVIEW,
        narrative.SOFT_MAX_IDS,
    ) == tuple(narrative_cfg.values())
    assert list(profiles()) == list(toml["profiles"])
    for name, values in toml["profiles"].items():
        assert {key: getattr(profiles()[name], key) for key in values} == values


def test_an_override_folder_changes_what_the_agent_does(tmp_path):
    text = (settings.DEFAULT_CONFIG_DIR / "agent.toml").read_text(encoding="utf-8")
    changed = (
        text.replace("max_ids = 15", "max_ids = 5")
        .replace("relevance_min = 0.15", "relevance_min = 0.3")
        .replace("max_calls = 8\n", "max_calls = 6\n", 1)
    )
    assert changed.count("\n") == text.count("\n") and changed != text
    (tmp_path / "agent.toml").write_text(changed, encoding="utf-8")
    # The library takes the override folder from resources/ (the one door to the environment).
    probe = """
from resources import environment
environment.hand_to_library()
from datetime import datetime
from narrative_mirror.agent import answer, narrative
from narrative_mirror.agent.profiles import profiles
from narrative_mirror.retrieval.records import ChatMessage

members = [ChatMessage(local_id=f"D1:{i}", message_id=f"c/D1:{i}", position=i, session=1, speaker="Ana",
                       text=f"message {i}", timestamp=datetime(2024, 3, 1, 9, i)) for i in range(12)]
block = narrative.Block("b1", members)
picked = narrative.select_phase_ids([block], {m.local_id: 1.0 - m.position / 100 for m in members},
                                    [m.local_id for m in members])
print(len(picked), answer.OFFLINE_VERIFIER.rsplit(" ", 1)[-1], profiles()["fast"].max_calls)
"""

    def run(config_dir: Path | None) -> str:
        env = {k: v for k, v in os.environ.items() if k != "NM_CONFIG_DIR"}
        env["PYTHONPATH"] = str(ROOT)
        if config_dir is not None:
            env["NM_CONFIG_DIR"] = str(config_dir)
        done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert run(None) == ["12", "0.15", "8"]
    assert run(tmp_path) == ["5", "0.3", "6"]


@pytest.mark.parametrize(
    "section, key", [("selection", "min_grade"), ("narrative", "story_ids"), ("profiles.balanced", "deadline_s")]
)
def test_a_missing_setting_fails_naming_it(section, key):
    config = packaged()
    table = config
    for part in section.split("."):
        table = table[part]
    del table[key]
    with pytest.raises(ValueError, match=rf"agent\.toml: {section}\.{key}: missing"):
        validate(config)


def test_a_mistyped_setting_fails_naming_it():
    config = packaged()
    config["narrative"]["min_ids"] = "three"
    with pytest.raises(ValueError, match=r"agent\.toml: narrative\.min_ids: expected an integer, got 'three'"):
        validate(config)
    config = packaged()
    config["answer"]["relevance_min"] = True
    with pytest.raises(ValueError, match=r"agent\.toml: answer\.relevance_min: expected a number"):
        validate(config)


def test_an_override_without_a_setting_fails_when_read(tmp_path, monkeypatch, fresh_config):
    text = (settings.DEFAULT_CONFIG_DIR / "agent.toml").read_text(encoding="utf-8")
    (tmp_path / "agent.toml").write_text(text.replace("variant_weight = 0.4\n", ""), encoding="utf-8")
    monkeypatch.setenv("NM_CONFIG_DIR", str(tmp_path))
    with pytest.raises(ValueError, match=r"agent\.toml: selection\.variant_weight: missing"):
        agent_config()


def test_the_config_is_read_once_while_unchanged(monkeypatch, fresh_config):
    reads = []
    real = settings.read_config_file
    monkeypatch.setattr(settings, "read_config_file", lambda path: reads.append(path.name) or real(path))
    assert agent_config() is agent_config()
    assert get_profile("fast") is get_profile("fast")
    assert reads == ["agent.toml"]


def rewrite(path: Path, text: str) -> None:
    """``text`` into ``path`` with a modification time surely newer than before (coarse clocks)."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before + 10**9, before + 10**9))


def test_a_changed_agent_toml_applies_to_the_next_call_without_a_restart(tmp_path, monkeypatch):
    # The modules are imported (at the top of this file) before the override exists.
    text = (settings.DEFAULT_CONFIG_DIR / "agent.toml").read_text(encoding="utf-8")
    monkeypatch.setenv("NM_CONFIG_DIR", str(tmp_path))
    sentence = "we finally painted the old garden shed a bright sunny yellow with tiny blue flowers everywhere"
    question = "What did they do?"
    members = [
        ChatMessage(
            local_id=f"D1:{i}",
            message_id=f"c/D1:{i}",
            position=i,
            session=1,
            speaker="Ana",
            text=f"message {i}",
            timestamp=datetime(2024, 3, 1, 9, i),
        )
        for i in range(20)
    ]
    block = narrative.Block("b1", members)
    scores = {m.local_id: 1.0 - m.position / 100 for m in members}

    def observed() -> tuple:
        span = slots.phrase_span(sentence, question)
        picked = narrative.select_phase_ids([block], scores, [m.local_id for m in members])
        return (
            len(span.split()),
            len(picked),
            get_profile("fast").max_calls,
            answer.offline_verifier().rsplit(" ", 1)[-1],
            state.VARIANT_WEIGHT,
        )

    rewrite(tmp_path / "agent.toml", text)
    assert observed() == (10, 15, 8, "0.15", 0.4)
    changed = (
        text.replace("span_words = 10", "span_words = 4")
        .replace("max_ids = 15", "max_ids = 6")
        .replace("relevance_min = 0.15", "relevance_min = 0.3")
        .replace("max_calls = 8\n", "max_calls = 6\n", 1)
        .replace("variant_weight = 0.4", "variant_weight = 0.5")
    )
    assert changed.count("\n") == text.count("\n") and changed != text
    rewrite(tmp_path / "agent.toml", changed)
    assert observed() == (4, 6, 6, "0.3", 0.5)
    # Removing the override goes back to the packaged file.
    (tmp_path / "agent.toml").unlink()
    assert observed() == (10, 15, 8, "0.15", 0.4)
