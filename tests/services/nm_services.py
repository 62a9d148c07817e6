"""Helpers of the tests that need real servers (marker `services`): where the servers are,
fresh databases and buckets, copies of the demo chats, Celery worker processes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from narrative_mirror.settings import DEMO_ARCS_DIR, DEMO_DATA_DIR

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SERVICES_SCRIPT = REPO / "scripts" / "services.sh"
SERVICE_VARS = ("NM_TEST_PG_URL", "NM_TEST_REDIS_URL", "NM_TEST_S3_ENDPOINT")
# What a test S3 client presents (moto accepts any keys).
S3_KEYS = {"AWS_ACCESS_KEY_ID": "nm-test-key", "AWS_SECRET_ACCESS_KEY": "nm-test-secret", "AWS_REGION": "us-east-1"}


@dataclass(frozen=True)
class Services:
    pg_url: str  # superuser URL of the test cluster's `postgres` database
    redis_url: str
    s3_endpoint: str


def clean_env(**settings: str) -> dict[str, str]:
    """This process's environment without any narrative-mirror, Dagster, object-store, LLM or Slack
    setting (offline), plus ``settings``: what a command or worker of one test setup sees."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NM_", "AWS_", "DAGSTER_", "OPENAI_", "SLACK_"))}
    return {**env, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **settings}


def cli(args: list[str], env: dict[str, str], timeout_s: float = 300) -> dict:
    """``narrative-mirror ARGS --json`` in ``env``; its JSON output (the command must succeed)."""
    proc = subprocess.run(
        [str(BIN / "narrative-mirror"), *args, "--json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return json.loads(proc.stdout)


def materialize(env: dict[str, str], runs: list[list[str]], timeout_s: float = 300) -> None:
    """``dagster asset materialize ARGS`` for every ARGS of ``runs``, all at once (one run each, as
    the daemon launches them), in ``env``; every one must succeed within ``timeout_s``."""
    procs = [
        subprocess.Popen(
            [str(BIN / "dagster"), "asset", "materialize", *args],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for args in runs
    ]
    deadline = time.monotonic() + timeout_s
    failed = []
    for proc in procs:
        try:
            out, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        if proc.returncode != 0:
            failed.append(out[-4000:])
    assert not failed, "\n".join(failed)


@contextmanager
def instance_of(env: dict[str, str]) -> Iterator:
    """The Dagster instance of the setup ``env`` describes (its NM_HOME and NM_DAGSTER_PG_URL)."""
    from home_instance import home_instance

    with pytest.MonkeyPatch.context() as mp:
        for key in ("NM_HOME", "NM_DAGSTER_PG_URL"):
            if env.get(key):
                mp.setenv(key, env[key])
            else:
                mp.delenv(key, raising=False)
        with home_instance() as instance:
            yield instance


def start_services() -> bool:
    """Start the servers (scripts/services.sh) unless they answer; whether this call started them."""
    running = subprocess.run(["bash", str(SERVICES_SCRIPT), "status"], capture_output=True).returncode == 0
    subprocess.run(["bash", str(SERVICES_SCRIPT), "start"], capture_output=True, check=True)
    return not running


def stop_services() -> None:
    subprocess.run(["bash", str(SERVICES_SCRIPT), "stop"], capture_output=True)


def _from_env_file() -> dict[str, str]:
    """The servers scripts/services.sh started for this checkout, if the variables are not set."""
    proc = subprocess.run(["bash", str(SERVICES_SCRIPT), "env"], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        return {}
    found = {}
    for line in proc.stdout.splitlines():
        if line.startswith("export ") and "=" in line:
            key, value = line[len("export ") :].split("=", 1)
            found[key] = value.strip().strip("'")
    return found


def find_services() -> Services:
    values = {k: os.environ.get(k, "") for k in SERVICE_VARS}
    if not all(values.values()):
        from_file = _from_env_file()
        values = {k: values[k] or from_file.get(k, "") for k in SERVICE_VARS}
    missing = [k for k, v in values.items() if not v]
    if missing:
        pytest.fail(
            f"servers of the `services` tests are not running ({', '.join(missing)} unknown): "
            "run `bash scripts/test.sh -m services`, or `bash scripts/services.sh start` first",
            pytrace=False,
        )
    found = Services(values["NM_TEST_PG_URL"], values["NM_TEST_REDIS_URL"], values["NM_TEST_S3_ENDPOINT"])
    _check_answering(found)
    return found


def _check_answering(found: Services) -> None:
    import urllib.request

    import psycopg2
    import redis

    problems = []
    try:
        psycopg2.connect(found.pg_url, connect_timeout=5).close()
    except Exception as exc:  # noqa: BLE001 - reported below, whatever it is
        problems.append(f"PostgreSQL at {found.pg_url}: {exc}")
    try:
        redis.Redis.from_url(found.redis_url, socket_timeout=5).ping()
    except Exception as exc:  # noqa: BLE001
        problems.append(f"Redis at {found.redis_url}: {exc}")
    try:
        urllib.request.urlopen(found.s3_endpoint, timeout=5).close()
    except Exception as exc:  # noqa: BLE001
        problems.append(f"S3-compatible server at {found.s3_endpoint}: {exc}")
    if problems:
        pytest.fail("servers not answering: " + "; ".join(problems), pytrace=False)


def create_database(services: Services) -> str:
    """A fresh database on the test cluster; returns its URL."""
    import psycopg2

    name = f"nm_{uuid.uuid4().hex[:12]}"
    conn = psycopg2.connect(services.pg_url, connect_timeout=10)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    conn.close()
    return services.pg_url.rsplit("/", 1)[0] + "/" + name


def drop_database(services: Services, url: str) -> None:
    import psycopg2

    conn = psycopg2.connect(services.pg_url, connect_timeout=10)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')
    conn.close()


def s3_client(services: Services):
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=services.s3_endpoint,
        region_name=S3_KEYS["AWS_REGION"],
        aws_access_key_id=S3_KEYS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=S3_KEYS["AWS_SECRET_ACCESS_KEY"],
    )


def create_bucket(services: Services) -> str:
    name = f"nm-{uuid.uuid4().hex[:12]}"
    s3_client(services).create_bucket(Bucket=name)
    return name


def s3_env(services: Services, bucket: str, prefix: str = "index") -> dict[str, str]:
    """The settings that put the LanceDB index on the test S3 server."""
    return {
        "NM_LANCEDB_URI": f"s3://{bucket}/{prefix}",
        "AWS_ENDPOINT_URL": services.s3_endpoint,
        "AWS_ALLOW_HTTP": "true",
        **S3_KEYS,
    }


def demo_copy(target: Path, names: list[str] | None = None) -> Path:
    """A copy of the packaged RealTalk-format demo chats (and their ARC cases) in ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    for chat in sorted(DEMO_DATA_DIR.glob("*.json")):
        if names is None or chat.stem in names:
            shutil.copy(chat, target / chat.name)
            arcs = DEMO_ARCS_DIR / f"{chat.stem}.arcs.json"
            if arcs.is_file():
                shutil.copy(arcs, target / arcs.name)
    return target


class Workers:
    """Celery workers of the distributed engine, each its own process (scripts/worker.sh)."""

    def __init__(self, env: dict[str, str], logs: Path, count: int = 2, ready_timeout_s: float = 300):
        self.procs: list[subprocess.Popen] = []
        self.logs = [logs / f"worker{i}.log" for i in range(1, count + 1)]
        for i, log in enumerate(self.logs, 1):
            with log.open("w") as out:
                self.procs.append(
                    subprocess.Popen(
                        ["bash", str(REPO / "scripts" / "worker.sh"), f"nm-test-{i}"],
                        cwd=REPO,
                        env=env,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
        deadline = time.monotonic() + ready_timeout_s
        while not all(" ready." in log.read_text() for log in self.logs):
            dead = [p.args for p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"Celery workers did not start: {self.tail()}")
            time.sleep(0.3)

    @property
    def pids(self) -> set[int]:
        return {p.pid for p in self.procs}  # worker.sh execs celery: same process

    def tail(self) -> str:
        return "\n".join(f"--- {log.name}\n" + "\n".join(log.read_text().splitlines()[-25:]) for log in self.logs)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
