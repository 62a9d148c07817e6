"""The environment as resources/environment.py reads it."""

from __future__ import annotations

import pytest

from narrative_mirror.llm import LLMClient, LLMSettings
from resources import environment

# --- the LLM endpoint -----------------------------------------------------------------------------


def test_llm_settings_without_openai_variables_means_no_llm(monkeypatch):
    monkeypatch.setenv("NM_LLM_MODEL", "ignored-without-a-server")
    assert environment.llm_settings() is None


def test_llm_settings_local_server_needs_no_key(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
    monkeypatch.delenv("NM_LLM_MODEL", raising=False)
    monkeypatch.delenv("NM_LLM_TIMEOUT", raising=False)
    assert environment.llm_settings() == LLMSettings(
        base_url="http://127.0.0.1:8080/v1",
        api_key="not-needed",
        model="gpt-4o-mini",
        timeout_s=30.0,
        max_retries=2,
        temperature=0.0,
    )


def test_llm_settings_hosted_api_with_model_and_timeout(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("NM_LLM_MODEL", "gpt-4.1-nano")
    monkeypatch.setenv("NM_LLM_TIMEOUT", "12.5")
    settings = environment.llm_settings()
    assert settings is not None
    assert (settings.base_url, settings.api_key, settings.model, settings.timeout_s) == (
        None,
        "sk-test",
        "gpt-4.1-nano",
        12.5,
    )
    assert LLMClient(settings).fingerprint == "api.openai.com/gpt-4.1-nano"


@pytest.mark.parametrize("bad", ["soon", "0", "-3"])
def test_llm_settings_bad_timeout_names_the_variable(monkeypatch, bad):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
    monkeypatch.setenv("NM_LLM_TIMEOUT", bad)
    with pytest.raises(ValueError, match="NM_LLM_TIMEOUT"):
        environment.llm_settings()
