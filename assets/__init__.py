"""Dagster assets, one package per domain (sources, ingest, layers, index, evaluation, events),
each exposing its ``defs``; thin wrappers around narrative_mirror (the library does the work).
Shared machinery: ``versioning`` (versioned assets and outputs, pools), ``code_versions``,
``freshness`` and ``partitions``."""

import warnings

import dagster as dg

# observable_source_asset and partitioned checks are beta/preview in 1.13; we rely on them knowingly.
warnings.filterwarnings("ignore", category=dg.BetaWarning)
warnings.filterwarnings("ignore", category=dg.PreviewWarning)
