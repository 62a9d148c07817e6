"""Jobs of the layers domain."""

import dagster as dg

from assets.index.assets import INDEX_ASSETS
from assets.ingest.assets import INGEST_ASSETS
from assets.layers.assets import LAYER_ASSETS

build_job = dg.define_asset_job(
    "build_job",
    selection=dg.AssetSelection.assets(*LAYER_ASSETS, *INDEX_ASSETS),
    description="Embeddings, L1/L1.5/L2 layers and the LanceDB index of one chat file.",
)

# What `narrative-mirror build` runs for a chat file whose input changed: ingest, layers and index
# in one run, listed under this name (not __ephemeral_asset_job__) on the UI's Jobs pages.
memory_job = dg.define_asset_job(
    "memory_job",
    selection=dg.AssetSelection.assets(*INGEST_ASSETS, *LAYER_ASSETS, *INDEX_ASSETS),
    description="A chat file's whole memory: messages, gold QA, ARC cases, split, layers and the LanceDB index.",
)


defs = dg.Definitions(jobs=[build_job, memory_job])
