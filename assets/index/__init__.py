"""Index domain: the LanceDB index of each chat file and the store's nightly upkeep."""

import dagster as dg

from assets.index.assets import INDEX_ASSETS
from assets.index.jobs import index_maintenance_job, index_maintenance_schedule

defs = dg.Definitions(assets=INDEX_ASSETS, jobs=[index_maintenance_job], schedules=[index_maintenance_schedule])
