"""Narrative Mirror: layered memory over chat histories and evidence-level retrieval.

This package is the domain library. It must not import Dagster: the Dagster layer lives in
the top-level ``assets``, ``jobs`` and ``resources`` packages and calls into this one.
"""

__version__ = "0.1.0"
