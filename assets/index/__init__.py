"""Index domain: the LanceDB index of each chat file (the store's nightly upkeep: jobs/index.py;
the sensor that checks the stored memory and requests the rebuild of what is damaged:
jobs/integrity.py)."""

import dagster as dg

from assets.index.assets import INDEX_ASSETS

defs = dg.Definitions(assets=INDEX_ASSETS)
