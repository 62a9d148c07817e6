"""Layers domain: embeddings, L1/L1.5/L2 and the LanceDB index, kept in step with their inputs by
Declarative Automation (the rule is assets/freshness.py, shared with the command line)."""

import dagster as dg

from assets.layers import LAYER_ASSETS

build_job = dg.define_asset_job(
    "build_job",
    selection=dg.AssetSelection.assets(*LAYER_ASSETS),
    description="Embeddings, L1/L1.5/L2 layers and the LanceDB index of one chat file.",
)

# Ingest, layers and index: an edited chat file flows from messages to the index. Runs in the
# code server because the freshness rule is Python of ours.
memory_automation_sensor = dg.AutomationConditionSensorDefinition(
    "memory_automation_sensor",
    target=dg.AssetSelection.groups("ingest", "layers", "index"),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=30,
    use_user_code_server=True,
)

defs = dg.Definitions(assets=LAYER_ASSETS, jobs=[build_job], sensors=[memory_automation_sensor])
