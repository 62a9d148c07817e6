"""Sources domain: the files the graph reads (chat and ARC files, config, prompts) as observable
source assets (the sensor that records their versions: jobs/sources.py)."""

import dagster as dg

from assets.sources.assets import SOURCES

defs = dg.Definitions(assets=SOURCES)
