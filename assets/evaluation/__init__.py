"""Evaluation domain: per-chat QA and ARC evaluations with their regression checks, the
train/test summary and the profile protocol, and their train-only automation (the nightly train
schedule, the explicit test backfill job and alerts for failed evaluation runs: jobs/evaluation.py)."""

import dagster as dg

from assets.evaluation.assets import EVAL_ASSETS
from assets.evaluation.automation import eval_automation_sensor

defs = dg.Definitions(assets=EVAL_ASSETS, sensors=[eval_automation_sensor])
