"""Two independent assets sharing one pool, run by the Celery executor: how the tests check that
a pool limit holds across workers (the workers load this file by path)."""

import time

import dagster as dg
from dagster_celery import celery_executor

POOL = "nm_test_pool"
STEP_S = 5.0  # long enough that two free workers overlap on a loaded machine


@dg.asset(pool=POOL)
def pooled_a() -> int:
    time.sleep(STEP_S)
    return 1


@dg.asset(pool=POOL)
def pooled_b() -> int:
    time.sleep(STEP_S)
    return 2


defs = dg.Definitions(
    assets=[pooled_a, pooled_b],
    executor=celery_executor.configured(
        {"broker": {"env": "NM_CELERY_BROKER_URL"}, "backend": {"env": "NM_CELERY_BROKER_URL"}}
    ),
)
