"""Evaluation domain: per-chat QA and ARC evaluations with their regression checks, the
train/test summary and the profile protocol; train-only automation, the nightly train schedule,
the explicit test backfill job, and alerts for failed evaluation runs."""

import dagster as dg

from assets.evaluation.assets import EVAL_ASSETS
from assets.evaluation.automation import eval_automation_sensor
from assets.evaluation.jobs import (
    eval_failure_alert_sensor,
    eval_summary_job,
    nightly_train_eval,
    profile_protocol_job,
    test_eval_job,
    train_eval_job,
)

defs = dg.Definitions(
    assets=EVAL_ASSETS,
    jobs=[train_eval_job, test_eval_job, eval_summary_job, profile_protocol_job],
    schedules=[nightly_train_eval],
    sensors=[eval_automation_sensor, eval_failure_alert_sensor],
)
