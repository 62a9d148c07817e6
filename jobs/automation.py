"""Declarative Automation: keeps the memory layers and index in step with their inputs."""

import dagster as dg

from assets.layers import LAYER_ASSETS

build_job = dg.define_asset_job(
    "build_job",
    selection=dg.AssetSelection.assets(*LAYER_ASSETS),
    description="Embeddings, L1/L1.5/L2 layers and the LanceDB index of one chat file.",
)

# Evaluation assets are deliberately not targeted: train partitions are evaluated by the
# nightly schedule and test partitions only by an explicit, tagged backfill.
layers_automation_sensor = dg.AutomationConditionSensorDefinition(
    "layers_automation_sensor",
    target=dg.AssetSelection.assets(*LAYER_ASSETS, "eval_summary"),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=60,
)
