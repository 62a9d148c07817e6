"""Versioned configuration files as observable source assets.

The data version of each is the hash of its file(s); the assets that use a file list it in
``deps``, so editing e.g. retrieval.toml makes exactly the evaluation assets stale, and the
lineage graph shows which config version fed which recall figure.
"""


import dagster as dg

from narrative_mirror import settings


def _config_source(name: str, description: str) -> dg.SourceAsset:
    @dg.observable_source_asset(name=f"{name}_config", group_name="config", description=description)
    def _observe(context) -> dg.DataVersion:
        path = settings.config_path(name)
        return dg.DataVersion(settings.file_hash(path)[:32])

    return _observe


embedding_config = _config_source("embedding", "Embedder model (config/embedding.toml).")
layers_config = _config_source("layers", "L1/L1.5/L2 parameters (config/layers.toml).")
retrieval_config = _config_source("retrieval", "Retrieval and reranker settings (config/retrieval.toml).")
split_config = _config_source("split", "Train/test assignment patterns (config/split.toml).")
evaluation_config = _config_source("evaluation", "Evaluation profile and regression tolerances (config/evaluation.toml).")


@dg.observable_source_asset(group_name="config", description="All prompt files in effect (prompts/*.txt).")
def prompts(context) -> dg.DataVersion:
    return dg.DataVersion(settings.prompts_hash()[:32])


CONFIG_SOURCES = [embedding_config, layers_config, retrieval_config, split_config, evaluation_config, prompts]
