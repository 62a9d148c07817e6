"""Dagster assets: thin wrappers around narrative_mirror (the library does the work)."""
