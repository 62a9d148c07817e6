"""The Dagster instance the command line opens on the test's NM_HOME: the dagster.yaml it writes
(instance/storage.py: pooled SQLite storage), used as ``with home_instance() as instance:`` (the
instance disposes itself on exit). Tests of assets, checks and automation use it rather than
``dg.instance_for_test()``, whose SQLite event log opens a new engine per query: evaluating
automation conditions asks for the dynamic partitions thousands of times (88 s of a 137 s
freshness test went there)."""

from __future__ import annotations

import dagster as dg

from instance.lifecycle import dagster_home


def home_instance() -> dg.DagsterInstance:
    return dg.DagsterInstance.from_config(str(dagster_home()))
