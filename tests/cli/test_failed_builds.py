"""A chat whose build failed stays failed: every later command reports it (build exits 1) and
nothing takes it as built, until its input, the config or the code changes or ``build --repair``
retries it; ``serve`` names it among what it does not serve."""

from __future__ import annotations

import json

import dagster as dg
import pytest
from chat_factory import small_chat, write_chat

import assets.index.assets as index_assets
from cli.broken import NOT_RETRIED
from cli.main import main
from instance.lifecycle import dagster_home


def _failing_check(message_ids, rows):
    return dg.AssetCheckResult(
        check_name="vectors_for_every_message",
        passed=False,
        severity=dg.AssetCheckSeverity.ERROR,
        description="1 messages without a row",
    )


def _runs() -> int:
    with dg.DagsterInstance.from_config(str(dagster_home())) as instance:
        return instance.get_runs_count()


def _json(capsys, argv) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.slow  # four builds of one chat through Dagster: ~28 s
def test_a_failed_blocking_check_is_reported_by_every_later_command_until_retried(tmp_path, capsys, monkeypatch):
    data = tmp_path / "data"
    write_chat(data, "good", small_chat())
    write_chat(data, "other", small_chat())
    real_check = index_assets.vectors_for_every_message
    calls = []

    def fails_for_good(message_ids, rows):  # the check fails for one chat, once
        calls.append(rows.column("chat_file")[0].as_py())
        return _failing_check(message_ids, rows) if calls[-1] == "good" else real_check(message_ids, rows)

    monkeypatch.setattr(index_assets, "vectors_for_every_message", fails_for_good)
    code, first = _json(capsys, ["build", "--data", str(data)])
    assert code == 1 and first["built"] == 1 and list(first["not_built"]) == ["good"]
    assert "vectors_for_every_message" in first["not_built"]["good"]
    monkeypatch.setattr(index_assets, "vectors_for_every_message", real_check)

    # Nothing changed: Dagster alone would call it up to date (its asset was materialized).
    runs = _runs()
    code, second = _json(capsys, ["build", "--data", str(data)])
    assert code == 1 and second["built"] == 1 and second["not_built"]["good"].endswith(NOT_RETRIED)
    assert second["failures"] == [f"good: {second['not_built']['good']}"] and _runs() == runs
    assert main(["search", "--data", str(data), "--chat", "good", "bakery"]) == 1
    assert "the memory of good could not be built" in capsys.readouterr().err
    code, both = _json(capsys, ["search", "--data", str(data), "--all", "bakery"])
    assert code == 0 and both["chats"] == ["other"] and both["warnings"][0].startswith("good left out: ")

    import api.app

    served = []
    monkeypatch.setattr(api.app, "serve", lambda app, **kwargs: served.append(kwargs))
    code, serve = _json(capsys, ["serve", "--data", str(data), "--port", "8799"])
    assert code == 0 and served and serve["served"] == ["other"] and list(serve["not_served"]) == ["good"]

    code, third = _json(capsys, ["build", "--data", str(data), "--repair"])
    assert code == 0 and third["built"] == 2 and "lancedb_index" in third["per_file"]["good"]["ran"]
    code, fourth = _json(capsys, ["build", "--data", str(data)])
    assert code == 0 and fourth["built"] == 2 and fourth["per_file"]["good"]["ran"] == []
