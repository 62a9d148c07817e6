"""Jobs of the layers domain."""

import dagster as dg

from assets.index.assets import INDEX_ASSETS
from assets.layers.assets import LAYER_ASSETS

build_job = dg.define_asset_job(
    "build_job",
    selection=dg.AssetSelection.assets(*LAYER_ASSETS, *INDEX_ASSETS),
    description="Embeddings, L1/L1.5/L2 layers and the LanceDB index of one chat file.",
)
