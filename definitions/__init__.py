"""The one module that builds the Dagster Definitions (dg, dagster-webserver, CLI, tests):
every domain's assets (assets/<domain>/) and jobs (jobs/<domain>.py) merged, plus the resources
and the executor.

The executor: Dagster's default (steps in processes of the run's own machine) unless
``NM_CELERY_BROKER_URL`` names a Celery broker; then every job launched through the instance
(UI, daemon, schedules, sensors, ``dagster job launch`` / ``dagster asset materialize``) sends
each step to the Celery workers listening on that broker (``scripts/worker.sh``), on this machine
or others. The command line's own builds (``dg.materialize``) stay in its process.
"""

from __future__ import annotations

import dagster as dg

import jobs.adaptation
import jobs.evaluation
import jobs.events
import jobs.index
import jobs.ingest
import jobs.integrity
import jobs.layers
import jobs.sources
from assets import adaptation, evaluation, events, index, ingest, layers, sources
from resources import environment
from resources.dagster_resources import default_resources

DOMAINS = [sources, ingest, layers, index, evaluation, events, adaptation]
JOBS = [
    jobs.sources,
    jobs.ingest,
    jobs.layers,
    jobs.index,
    jobs.integrity,
    jobs.evaluation,
    jobs.events,
    jobs.adaptation,
]


def executor_from_env() -> dg.ExecutorDefinition | None:
    """The Celery executor when ``NM_CELERY_BROKER_URL`` is set (the result backend is
    ``NM_CELERY_BACKEND_URL``, default the broker), else None (Dagster's default executor).

    The URLs stay environment references in the run config, resolved in the process that runs
    the job: they are never stored with a run."""
    if (celery := environment.celery_envs()) is None:
        return None
    from dagster_celery import celery_executor

    broker_env, backend_env = celery
    return celery_executor.configured(
        {
            "broker": {"env": broker_env},
            "backend": {"env": backend_env},
            # One task at a time per worker process, acknowledged when taken: a step is never run twice.
            "config_source": {
                "worker_prefetch_multiplier": 1,
                "task_acks_late": False,
                "broker_connection_retry_on_startup": True,
            },
        },
        name="celery",
    )


def build_definitions(resources: dict | None = None) -> dg.Definitions:
    return dg.Definitions.merge(
        *[domain.defs for domain in DOMAINS + JOBS],
        dg.Definitions(resources=resources or default_resources(), executor=executor_from_env()),
    )


defs = build_definitions()
