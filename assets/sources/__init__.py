"""Sources domain: the files the graph reads (chat and ARC files, config, prompts) as observable
source assets, and the sensor that records their versions."""

import dagster as dg

from assets.sources.assets import SOURCES
from assets.sources.jobs import source_files_sensor

defs = dg.Definitions(assets=SOURCES, sensors=[source_files_sensor])
