"""Runner's Dagster instance folder."""

from jobs.runner import DEFAULT_INSTANCE_YAML, dagster_home


def test_instance_settings_written_once_and_edits_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("NM_HOME", str(tmp_path))
    config = dagster_home() / "dagster.yaml"
    assert config.read_text() == DEFAULT_INSTANCE_YAML and "enabled: false" in DEFAULT_INSTANCE_YAML
    config.write_text("telemetry:\n  enabled: true\n")
    dagster_home()
    assert config.read_text() == "telemetry:\n  enabled: true\n"
