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
    from jobs.instance import dagster_home

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
