"""Ingest domain: messages, gold QA (with its checks), ARC cases and the split of each chat file."""

import dagster as dg

from assets.ingest.assets import INGEST_ASSETS

defs = dg.Definitions(assets=INGEST_ASSETS)
