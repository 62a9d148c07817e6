"""Index domain: the LanceDB index of each chat file, the store's nightly upkeep, and the sensor
that checks the stored memory and requests the rebuild of what is damaged."""

import dagster as dg

from assets.index.assets import INDEX_ASSETS
from assets.index.jobs import index_maintenance_job, index_maintenance_schedule
from assets.index.sensors import integrity_sensor

defs = dg.Definitions(
    assets=INDEX_ASSETS,
    jobs=[index_maintenance_job],
    schedules=[index_maintenance_schedule],
    sensors=[integrity_sensor],
)
