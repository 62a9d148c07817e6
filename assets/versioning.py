"""Versioning shared by every domain: assets whose code version follows the code they run,
outputs whose data version is their content hash, and the step concurrency pools."""

import dagster as dg
import polars as pl

from narrative_mirror.storage import frame_hash

# Concurrency pools (step level, across every run and executor, Celery workers included): the
# embedding step and the steps that may call the LLM. Unlimited until a limit is set on the
# instance (`dagster instance concurrency set llm 4`; README "One machine or many").
EMBEDDER_POOL = "embedder"
LLM_POOL = "llm"

# The tag under which Dagster stores an event's data version.
DATA_VERSION_TAG = "dagster/data_version"


def versioned_asset(**kwargs):
    """``dg.asset`` whose code version is derived from the source it runs (assets/code_versions.py):
    editing the asset, a helper it calls or a library module it reaches makes it unsynced;
    comments, docstrings and unrelated modules do not."""
    from assets.code_versions import code_version_of

    def decorate(fn):
        return dg.asset(code_version=code_version_of(fn), **kwargs)(fn)

    return decorate


def versioned_output(df: pl.DataFrame, metadata: dict) -> dg.Output:
    """``df`` as an output whose data version is its content hash, with its row count: re-running
    an asset whose output did not change leaves everything downstream fresh."""
    metadata = {"dagster/row_count": dg.MetadataValue.int(df.height), **metadata}
    return dg.Output(df, data_version=dg.DataVersion(frame_hash(df)), metadata=metadata)
