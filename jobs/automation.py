"""Declarative Automation: keeps the memory layers, the index and the TRAIN evaluations in step
with their inputs (data, config files, code versions)."""

import dagster as dg

from assets.evaluation import EVAL_ASSETS
from assets.layers import LAYER_ASSETS


build_job = dg.define_asset_job(
    "build_job",
    selection=dg.AssetSelection.assets(*LAYER_ASSETS),
    description="Embeddings, L1/L1.5/L2 layers and the LanceDB index of one chat file.",
)

layers_automation_sensor = dg.AutomationConditionSensorDefinition(
    "layers_automation_sensor",
    target=dg.AssetSelection.assets(*LAYER_ASSETS),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=60,
)

# Runs in the code server because InTrainSplit is Python of ours.
eval_automation_sensor = dg.AutomationConditionSensorDefinition(
    "eval_automation_sensor",
    target=dg.AssetSelection.assets(*EVAL_ASSETS),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=300,
    use_user_code_server=True,
)
