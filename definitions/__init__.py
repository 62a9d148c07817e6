"""The one module that builds the Dagster Definitions (dg, dagster-webserver, CLI, tests)."""

from __future__ import annotations

import dagster as dg

from assets.config_sources import CONFIG_SOURCES
from assets.ingest import INGEST_ASSETS, split
from assets.evaluation import EVAL_ASSETS
from assets.events import retrieval_event_stats
from assets.layers import LAYER_ASSETS
from jobs.automation import build_job, eval_automation_sensor, layers_automation_sensor
from jobs.evaluation import EVAL_JOBS, eval_failure_alert_sensor, nightly_train_eval
from jobs.ingest import chat_files_sensor, ingest_job
from resources import default_resources

ALL_ASSETS = [*CONFIG_SOURCES, *INGEST_ASSETS, split, *LAYER_ASSETS, *EVAL_ASSETS, retrieval_event_stats]


def build_definitions(resources: dict | None = None) -> dg.Definitions:
    return dg.Definitions(
        assets=ALL_ASSETS,
        jobs=[ingest_job, build_job, *EVAL_JOBS],
        schedules=[nightly_train_eval],
        sensors=[chat_files_sensor, layers_automation_sensor, eval_automation_sensor, eval_failure_alert_sensor],
        resources=resources or default_resources(),
    )


defs = build_definitions()
