"""Layers domain: embeddings and the L1/L1.5/L2 layers of each chat file, the build job, and the
automation sensor that keeps a chat's memory (ingest, layers, index) current."""

import dagster as dg

from assets.layers.assets import LAYER_ASSETS
from assets.layers.automation import memory_automation_sensor
from assets.layers.jobs import build_job, memory_job

defs = dg.Definitions(assets=LAYER_ASSETS, jobs=[build_job, memory_job], sensors=[memory_automation_sensor])
