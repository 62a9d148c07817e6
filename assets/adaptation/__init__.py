"""Adaptation domain: the embedder adapted to the home's chats (``adapted_embedder``), its job
(on command) and the sensor that asks for a retrain once the home has grown enough."""

import dagster as dg

from assets.adaptation.assets import ADAPTATION_ASSETS
from assets.adaptation.jobs import adaptation_job, adaptation_sensor

defs = dg.Definitions(assets=ADAPTATION_ASSETS, jobs=[adaptation_job], sensors=[adaptation_sensor])
