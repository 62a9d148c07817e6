"""One check for the three config files the library reads per call (agent.toml, retrieval.toml,
layers.toml): an override with a misspelt or mistyped setting fails with one error format naming
the file and the setting, ``<file>: <section>.<key>: <problem>``."""

from __future__ import annotations

import pytest

from narrative_mirror import settings
from narrative_mirror.agent import config as agent_config_module
from narrative_mirror.layers.params import L1Params, L2Params, SessionParams, section
from narrative_mirror.retrieval.config import validate_config
from resources import environment


@pytest.fixture
def override(tmp_path, monkeypatch):
    """Write ``<name>.toml`` into an override folder as the packaged file with ``old`` replaced."""
    environment.hand_to_library()
    monkeypatch.setenv("NM_CONFIG_DIR", str(tmp_path))
    agent_config_module._validated.cache_clear()

    def write(name: str, old: str, new: str) -> None:
        text = (settings.DEFAULT_CONFIG_DIR / f"{name}.toml").read_text(encoding="utf-8")
        assert old in text, f"{old!r} not in {name}.toml"
        (tmp_path / f"{name}.toml").write_text(text.replace(old, new, 1), encoding="utf-8")

    yield write
    agent_config_module._validated.cache_clear()


def _line(name: str, section_name: str, key: str) -> str:
    """The packaged line setting ``key`` in ``[section_name]`` of ``<name>.toml``."""
    current = None
    for line in (settings.DEFAULT_CONFIG_DIR / f"{name}.toml").read_text(encoding="utf-8").splitlines():
        if line.startswith("["):
            current = line.split("#")[0].strip().strip("[]")
        elif current == section_name and line.split("=")[0].strip() == key:
            return line + "\n"
    raise AssertionError(f"{name}.toml has no {section_name}.{key}")


def layers_sections():
    config = settings.load_config("layers")
    return [
        section(config, name, cls) for name, cls in (("l1", L1Params), ("l2", L2Params), ("sessions", SessionParams))
    ]


@pytest.mark.parametrize(
    ("name", "table", "key", "bad", "read", "expected"),
    [
        (
            "agent",
            "answer",
            "look_at",
            "look_at = 2.5\n",
            agent_config_module.agent_config,
            "expected an integer, got 2.5",
        ),
        ("agent", "answer", "look_at", "look_at_typo = 3\n", agent_config_module.agent_config, "missing"),
        ("layers", "l1", "window", 'window = "wide"\n', layers_sections, "expected an integer, got 'wide'"),
        ("layers", "l2", "link_threshold", "link_treshold = 0.5\n", layers_sections, "missing"),
        (
            "retrieval",
            "learned_scores",
            "temperature",
            "temperature = true\n",
            lambda: validate_config(settings.load_config("retrieval")),
            "expected a number, got True",
        ),
        (
            "retrieval",
            "hybrid",
            "w_bm25",
            "w_bm25_typo = 1.0\n",
            lambda: validate_config(settings.load_config("retrieval")),
            "missing",
        ),
    ],
)
def test_a_bad_setting_in_each_file_is_named_in_one_format(override, name, table, key, bad, read, expected):
    read()  # the packaged file passes
    override(name, _line(name, table, key), bad)
    with pytest.raises(ValueError) as failed:
        read()
    assert str(failed.value) == f"{name}.toml: {table}.{key}: {expected}"


def test_a_setting_a_closed_section_does_not_know_is_named(override):
    override(
        "layers",
        _line("layers", "l2", "link_threshold"),
        _line("layers", "l2", "link_threshold") + "link_treshold = 0.5\n",
    )
    with pytest.raises(
        ValueError, match=r"^layers\.toml: l2\.link_treshold: unknown setting \(known: link_threshold, "
    ):
        layers_sections()
