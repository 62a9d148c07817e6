"""The asset graph on the distributed engine: runs whose steps go through a Redis broker to two
Celery worker processes, with the instance on PostgreSQL and the LanceDB index on the S3-compatible
server: the whole multi-machine setup, on loopback."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from nm_services import (
    Workers,
    clean_env,
    create_bucket,
    create_database,
    demo_copy,
    drop_database,
    instance_of,
    materialize,
    s3_env,
)

pytestmark = [pytest.mark.services, pytest.mark.timeout(900)]

CHATS = ["demo_garden_Mara_Theo", "demo_harbor_Lena_Sam"]
MEMORY = [
    "messages",
    "gold_qa",
    "arc_cases",
    "split",
    "message_embeddings",
    "l1_topics",
    "l15_signals",
    "l2_threads",
    "lancedb_index",
]
BROKER_DB = 1  # the workers' Redis database, emptied first
RUN_TIMEOUT_S = 600


@dataclass
class Cluster:
    env: dict[str, str]
    workers: Workers
    home: Path
    data: Path


@pytest.fixture(scope="module")
def cluster(services, tmp_path_factory):
    import redis

    root = tmp_path_factory.mktemp("cluster")
    database, bucket = create_database(services), create_bucket(services)
    broker = f"{services.redis_url.rsplit('/', 1)[0]}/{BROKER_DB}"
    redis.Redis.from_url(broker).flushdb()
    home = root / "home"
    env = clean_env(
        NM_HOME=str(home),
        DAGSTER_HOME=str(home / "dagster"),
        NM_DATA_DIR=str(demo_copy(root / "data", CHATS)),
        NM_DAGSTER_PG_URL=database,
        NM_CELERY_BROKER_URL=broker,
        **s3_env(services, bucket),
    )
    with instance_of(env) as instance:
        instance.add_dynamic_partitions("chat_files", CHATS)
    workers = Workers(env, root)
    try:
        yield Cluster(env, workers, home, Path(env["NM_DATA_DIR"]))
    finally:
        workers.stop()
        drop_database(services, database)


def _materialize(cluster: Cluster, runs: list[list[str]]) -> None:
    try:
        materialize(cluster.env, runs, timeout_s=RUN_TIMEOUT_S)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{cluster.workers.tail()}") from None


def _step_events(instance, run_id: str) -> list:
    import dagster as dg

    return [
        r.event_log_entry
        for r in instance.get_records_for_run(run_id, limit=10_000).records
        if r.event_log_entry.dagster_event is not None
        and r.event_log_entry.dagster_event.event_type
        in (dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS)
    ]


def test_two_chats_built_by_two_workers_each_partition_once(cluster):
    import dagster as dg

    from resources.dagster_resources import StateResource, lancedb_resource

    started = time.monotonic()
    _materialize(cluster, [["-m", "definitions", "--select", ",".join(MEMORY), "--partition", chat] for chat in CHATS])
    seconds = time.monotonic() - started

    with instance_of(cluster.env) as instance:
        runs = instance.get_runs()
        assert sorted(r.tags.get("dagster/partition") for r in runs) == sorted(CHATS)
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
        # Every asset of every chat materialized exactly once.
        for asset in MEMORY:
            for chat in CHATS:
                records = instance.fetch_materializations(
                    dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[chat]), limit=10
                ).records
                assert len(records) == 1, (asset, chat, len(records))
        # Every step ran in a worker process, and both workers took steps.
        starts = [
            e
            for run in runs
            for e in _step_events(instance, run.run_id)
            if e.dagster_event.event_type == dg.DagsterEventType.STEP_START
        ]
        assert len(starts) == len(MEMORY) * len(CHATS)
        by_pid = Counter(e.dagster_event.pid for e in starts)
        assert set(by_pid) == cluster.workers.pids, (by_pid, cluster.workers.pids)

    # One index on the object store holds both chats, each message once; nothing local.
    with pytest.MonkeyPatch.context() as mp:
        for key in (
            "NM_LANCEDB_URI",
            "AWS_ENDPOINT_URL",
            "AWS_ALLOW_HTTP",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_REGION",
        ):
            mp.setenv(key, cluster.env[key])
        resource = lancedb_resource(StateResource(home=str(cluster.home)))
        store = resource.get()
    assert resource.resolved_uri().startswith("s3://")
    assert store.chat_files() == sorted(CHATS)
    for chat in CHATS:
        rows = store.messages_for(chat)
        stored = StateResource(home=str(cluster.home)).stored_frame("messages", chat)
        assert rows.height == stored.height and rows["message_id"].n_unique() == rows.height
    assert not (cluster.home / "lancedb").exists()
    print(f"2 chats x {len(MEMORY)} steps on 2 Celery workers: {seconds:.1f}s, steps per worker {dict(by_pid)}")


def test_a_pool_limit_holds_across_workers(cluster):
    """Steps of one pool never run at once beyond its limit, whichever workers are free: the
    mechanism that keeps the embedder and the LLM from being oversubscribed."""
    import dagster as dg

    graph = str(Path(__file__).with_name("pool_graph.py"))

    def run_with_limit(limit: int) -> list[tuple[float, float]]:
        with instance_of(cluster.env) as instance:
            instance.event_log_storage.set_concurrency_slots("nm_test_pool", limit)
            before = {r.run_id for r in instance.get_runs()}
        _materialize(cluster, [["-f", graph, "--select", "pooled_a,pooled_b"]])
        with instance_of(cluster.env) as instance:
            (run,) = [r for r in instance.get_runs() if r.run_id not in before]
            assert run.status == dg.DagsterRunStatus.SUCCESS
            events = _step_events(instance, run.run_id)
            spans = {}
            for e in events:
                spans.setdefault(e.step_key, {})[e.dagster_event.event_type] = e.timestamp
                assert e.dagster_event.pid in cluster.workers.pids
        return sorted((s[dg.DagsterEventType.STEP_START], s[dg.DagsterEventType.STEP_SUCCESS]) for s in spans.values())

    (a_start, a_end), (b_start, b_end) = run_with_limit(1)
    assert b_start >= a_end, "limit 1: the second step started before the first finished"
    (a_start, a_end), (b_start, b_end) = run_with_limit(2)
    assert b_start < a_end, "limit 2: two free workers should have run both steps at once"
