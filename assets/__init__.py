"""Dagster assets: thin wrappers around narrative_mirror (the library does the work)."""

import warnings

import dagster as dg

# observable_source_asset and partitioned checks are beta/preview in 1.13; we rely on them knowingly.
warnings.filterwarnings("ignore", category=dg.BetaWarning)
warnings.filterwarnings("ignore", category=dg.PreviewWarning)

# Concurrency pools (step level, across every run and executor, Celery workers included): the
# embedding step and the steps that may call the LLM. Unlimited until a limit is set on the
# instance (`dagster instance concurrency set llm 4`; README "One machine or many").
EMBEDDER_POOL = "embedder"
LLM_POOL = "llm"


def versioned_asset(**kwargs):
    """``dg.asset`` whose code version is derived from the source it runs (assets/code_versions.py):
    editing the asset, a helper it calls or a library module it reaches makes it unsynced;
    comments, docstrings and unrelated modules do not."""
    from assets.code_versions import code_version_of

    def decorate(fn):
        return dg.asset(code_version=code_version_of(fn), **kwargs)(fn)

    return decorate
