"""The Definitions load, through Python and through the tools a user runs (dg, the webserver)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import dagster as dg
import pytest
from loopback import free_port

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def test_definitions_load_and_validate():
    from definitions import defs

    dg.Definitions.validate_loadable(defs)
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {"messages", "gold_qa", "arc_cases", "split", "retrieval_config"} <= keys


def test_every_job_schedule_and_run_launching_sensor_is_defined_in_jobs():
    """jobs/ holds the jobs, their schedules and the sensors that launch runs; assets/ holds the
    assets (and their declarative automation) only."""
    from definitions import DOMAINS, JOBS, defs

    def launchers(d: dg.Definitions) -> set[str]:
        sensors = [s for s in d.sensors or [] if not isinstance(s, dg.AutomationConditionSensorDefinition)]
        return {x.name for x in [*(d.jobs or []), *(d.schedules or []), *sensors]}

    repo = defs.get_repository_def()
    loaded = {j.name for j in repo.get_all_jobs() if not j.name.startswith("__")} | {
        x.name
        for x in [*repo.schedule_defs, *repo.sensor_defs]
        if not isinstance(x, dg.AutomationConditionSensorDefinition)
    }
    assert {"build_job", "memory_job", "index_maintenance_job", "maintain_job", "integrity_sensor"} <= loaded
    assert set().union(*(launchers(m.defs) for m in JOBS)) == loaded
    assert not set().union(*(launchers(m.defs) for m in DOMAINS))
    assert all(m.__name__.startswith("jobs.") for m in JOBS)
    for path in sorted((REPO / "assets").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for made in ("define_asset_job(", "@dg.job", "@dg.op", "ScheduleDefinition(", "@dg.schedule", "@dg.sensor"):
            assert made not in text, f"{path.relative_to(REPO)} defines {made}: put it in jobs/"


@pytest.mark.e2e
def test_dg_check_defs_passes():
    proc = subprocess.run([str(BIN / "dg"), "check", "defs"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _graphql(port: int, query: str) -> dict:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        body = json.load(resp)
    assert "errors" not in body, body
    return body["data"]


@pytest.mark.e2e
def test_webserver_serves_assets_and_chat_file_partitions(tmp_path, monkeypatch):
    from instance.lifecycle import dagster_home

    monkeypatch.setenv("NM_HOME", str(tmp_path))
    home = dagster_home()  # the instance settings `narrative-mirror` writes (pooled SQLite storage)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.add_dynamic_partitions("chat_files", ["Chat_1_Emi_Elise", "demo_garden_Mara_Theo"])
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    proc = subprocess.Popen(
        [str(BIN / "dagster-webserver"), "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.time() + 180
        while True:
            try:
                data = _graphql(port, "{ assetNodes { assetKey { path } } }")
                if data["assetNodes"]:
                    break
            except Exception:
                if proc.poll() is not None or time.time() > deadline:
                    raise AssertionError(
                        f"webserver did not come up:\n{proc.stdout.read() if proc.poll() is not None else ''}"
                    ) from None
                time.sleep(1)
        names = {"/".join(n["assetKey"]["path"]) for n in data["assetNodes"]}
        assert {"messages", "gold_qa", "arc_cases", "split"} <= names
        node = _graphql(
            port, '{ assetNodeOrError(assetKey: {path: ["messages"]}) { ... on AssetNode { partitionKeys } } }'
        )
        assert sorted(node["assetNodeOrError"]["partitionKeys"]) == ["Chat_1_Emi_Elise", "demo_garden_Mara_Theo"]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
