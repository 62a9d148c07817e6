"""The Dagster instance on PostgreSQL (NM_DAGSTER_PG_URL): the demo chats built and evaluated by
the command line against a fresh database, with nothing of the instance left in NM_HOME."""

from __future__ import annotations

import psycopg2
import pytest
from nm_services import clean_env, cli, demo_copy

pytestmark = [pytest.mark.services, pytest.mark.timeout(900)]


def _count(url: str, sql: str) -> int:
    with psycopg2.connect(url, connect_timeout=10) as conn, conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchone()[0]


def test_demo_chats_built_and_evaluated_on_a_postgres_instance(tmp_path, pg_database):
    data = demo_copy(tmp_path / "demo")
    home = tmp_path / "home"
    env = clean_env(NM_HOME=str(home), NM_DAGSTER_PG_URL=pg_database)

    result = cli(["eval", "--split", "all", "--allow-test", "--data", str(data)], env)
    assert not result["problems"] and not result["failures"], result
    assert sorted(result["chat_files"]) == sorted(p.stem for p in data.glob("*.json") if ".arcs" not in p.name)
    assert set(result["per_split"]) == {"train", "test"}
    assert result["questions"] > 0 and result["arc_cases"] > 0
    assert result["recall@10"] > 0.5 and result["arc_phase_coverage"] > 0.5

    # Runs, events and asset records are in the database; the home holds no instance files.
    runs = _count(pg_database, "SELECT count(*) FROM runs WHERE status = 'SUCCESS'")
    assert runs >= 3
    assert _count(pg_database, "SELECT count(*) FROM runs WHERE status <> 'SUCCESS'") == 0
    assert (
        _count(pg_database, "SELECT count(*) FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION'")
        > 3 * 9
    )
    assert not list(home.rglob("*.db")), list(home.rglob("*.db"))
    assert "postgres" not in (home / "dagster" / "dagster.yaml").read_text()  # no URL, no password written

    # A second command finds everything built, in the database.
    again = cli(["build", "--data", str(data)], env)
    assert all(not row["ran"] for row in again["per_file"].values()), again["per_file"]
    assert _count(pg_database, "SELECT count(*) FROM runs") == runs


def test_postgres_selected_by_the_url_setting_and_the_url_never_stored(tmp_path, monkeypatch, pg_database):
    import dagster as dg
    from home_instance import home_instance

    monkeypatch.setenv("NM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NM_DAGSTER_PG_URL", pg_database)  # a plain postgresql:// URL works

    @dg.asset
    def numbers() -> int:
        return 1

    with home_instance() as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        assert all(dg.materialize([numbers], instance=instance).success for _ in range(3))
        assert len(instance.get_runs()) == 3
        # What travels to run workers and Celery tasks names the variable, not the URL.
        ref = instance.get_ref()
        assert "NM_DAGSTER_PG_URL" in ref.storage_data.config_yaml and pg_database not in repr(ref)
        # Statements share the process's open connections (not one new connection each).
        engine = instance.run_storage._engine
        assert engine is instance.event_log_storage._engine and type(engine.pool).__name__ == "QueuePool"
    assert not list((tmp_path / "home").rglob("*.db"))
