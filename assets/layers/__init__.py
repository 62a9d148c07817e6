"""Layers domain: embeddings and the L1/L1.5/L2 layers of each chat file (their jobs:
jobs/layers.py), and the automation sensor that keeps a chat's memory (ingest, layers, index) current."""

import dagster as dg

from assets.layers.assets import LAYER_ASSETS
from assets.layers.automation import memory_automation_sensor

defs = dg.Definitions(assets=LAYER_ASSETS, sensors=[memory_automation_sensor])
