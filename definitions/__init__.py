"""The one module that builds the Dagster Definitions (dg, dagster-webserver, CLI, tests):
the domains' own Definitions merged, plus the resources."""

from __future__ import annotations

import dagster as dg

from jobs import evaluation, ingest, layers, operations
from resources import default_resources

DOMAINS = [ingest.defs, layers.defs, evaluation.defs, operations.defs]


def build_definitions(resources: dict | None = None) -> dg.Definitions:
    return dg.Definitions.merge(*DOMAINS, dg.Definitions(resources=resources or default_resources()))


defs = build_definitions()
