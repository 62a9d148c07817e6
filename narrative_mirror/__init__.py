"""Narrative Mirror: layered memory over chat histories and evidence-level retrieval.

This package is the domain library. It must not import Dagster: the Dagster layer lives in
the top-level ``assets``, ``jobs`` and ``resources`` packages and calls into this one.
Its front door is ``Memory`` (narrative_mirror/front_door.py); NM_HOME's layout is ``Home``.
"""

from narrative_mirror.front_door import Asked, Memory
from narrative_mirror.home import Home

__version__ = "0.1.0"
__all__ = ["Asked", "Home", "Memory", "__version__"]
