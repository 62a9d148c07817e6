"""Jobs of the ingest domain."""

import dagster as dg

from assets.ingest.assets import INGEST_ASSETS

ingest_job = dg.define_asset_job(
    "ingest_job",
    selection=dg.AssetSelection.assets(*INGEST_ASSETS),
    description="Read chat files: messages, gold QA, ARC cases and the split of one chat file.",
)


defs = dg.Definitions(jobs=[ingest_job])
