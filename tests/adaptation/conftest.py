"""A home whose embedding.toml turns the adaptation on, with a tiny pair sample."""

from __future__ import annotations

import re

import pytest

from narrative_mirror import settings


def write_adaptation_config(folder, **values) -> None:
    """embedding.toml into ``folder`` with [adaptation] on and ``values`` (e.g. pair_cap=6) set."""
    text = settings.config_path("embedding").read_text()
    text, n = re.subn(r"^enabled = false.*$", "enabled = true", text, flags=re.M)
    assert n == 1
    for key, value in values.items():
        text, n = re.subn(rf"^{key} = [\d.]+", f"{key} = {value}", text, flags=re.M)
        assert n == 1, key
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "embedding.toml").write_text(text)


@pytest.fixture
def adaptation_on(tmp_path, monkeypatch):
    """NM_CONFIG_DIR with the adaptation on: 6 pairs, 1 epoch (no compute budget: a tiny home
    would spend it all on the lower layers)."""
    folder = tmp_path / "cfg"
    write_adaptation_config(folder, pair_cap=6, epochs=1, cost_budget=0)
    monkeypatch.setenv("NM_CONFIG_DIR", str(folder))
    return folder
