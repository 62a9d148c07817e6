"""Adaptation domain: the embedder adapted to the home's chats (``adapted_embedder``); its job and
the sensor that asks for a retrain once the home has grown enough are jobs/adaptation.py."""

import dagster as dg

from assets.adaptation.assets import ADAPTATION_ASSETS

defs = dg.Definitions(assets=ADAPTATION_ASSETS)
