"""The one freshness rule: which asset partitions need a run, asked the same way by the daemon's
automation sensors and by the command line.

A partition needs a run when it is missing or *unsynced*: its code version differs from the
one that produced it, or a dependency's data version moved since it was produced. That is
Dagster's own definition of "unsynced" (the UI's label): the materialization's provenance tags
record the code version and, per input, the data version (unpartitioned inputs) or the event
id it read (partitioned inputs). Here it is computed with public instance APIs only, so
it holds across Dagster releases; ``tests/assets/test_freshness.py`` checks it against
Dagster's internal resolver.

The rule is stateless (no cursor): after the command line builds something, the daemon's next
tick finds nothing to do, and after a materialization in the UI the command line says up to date.
"""

from __future__ import annotations

from collections.abc import Iterable

import dagster as dg

from assets.partitions import chat_files
from assets.versioning import DATA_VERSION_TAG


class FreshnessQuery:
    """Answers "does this asset partition need a run, and why?" against one instance.

    Caches records for the life of one evaluation (one sensor tick or one planning step).
    """

    def __init__(self, instance: dg.DagsterInstance, asset_graph):
        self.instance = instance
        self.asset_graph = asset_graph
        self._latest: dict[tuple, dg.EventLogRecord | None] = {}
        self._keys: list[str] | None = None

    def _record(
        self, key: dg.AssetKey, partition: str | None, after: int | None = None, before: int | None = None
    ) -> dg.EventLogRecord | None:
        cache_key = (key, partition, after, before)
        if cache_key not in self._latest:
            node = self.asset_graph.get(key)
            fetch = self.instance.fetch_observations if node.is_observable else self.instance.fetch_materializations
            filter_ = dg.AssetRecordsFilter(
                asset_key=key,
                asset_partitions=[partition] if partition else None,
                after_storage_id=after,
                before_storage_id=before,
            )
            self._latest[cache_key] = next(iter(fetch(filter_, limit=1).records), None)
        return self._latest[cache_key]

    def _partition_keys(self) -> list[str]:
        if self._keys is None:
            self._keys = self.instance.get_dynamic_partitions(chat_files.name)
        return self._keys

    def _parent_partitions(self, parent: dg.AssetKey, child: dg.AssetKey, partition: str | None) -> list[str | None]:
        """The partitions of ``parent`` that ``child``'s ``partition`` reads: the same chat file,
        every chat file (an unpartitioned aggregate), or the one unpartitioned output."""
        if not self.asset_graph.get(parent).is_partitioned:
            return [None]
        if self.asset_graph.get(child).is_partitioned:
            return [partition]
        return self._partition_keys()

    def reason(self, key: dg.AssetKey, partition: str | None) -> str | None:
        """Why ``key``/``partition`` needs a run ("missing", "code version changed", ...), or None."""
        record = self._record(key, partition)
        if record is None:
            return "missing"
        provenance = dg.DataProvenance.from_tags(record.asset_materialization.tags)
        node = self.asset_graph.get(key)
        if provenance is None:  # materialized without provenance (reported from outside a run)
            return None
        if node.code_version is not None and node.code_version != provenance.code_version:
            return "code version changed"
        for parent in sorted(set(provenance.input_data_versions) - set(node.parent_keys)):
            return f"no longer depends on {parent.to_user_string()}"
        for parent in sorted(node.parent_keys):
            if not provenance.has_input_asset(parent):
                return f"new dependency on {parent.to_user_string()}"
            for parent_partition in self._parent_partitions(parent, key, partition):
                if self._input_changed(parent, parent_partition, provenance):
                    where = f"[{parent_partition}]" if parent_partition and partition is None else ""
                    return f"{parent.to_user_string()}{where} has a new data version"
        return None

    def _input_changed(self, parent: dg.AssetKey, partition: str | None, provenance: dg.DataProvenance) -> bool:
        if partition is None:
            current = self._record(parent, None)
            return _data_version(current) != provenance.input_data_versions[parent].value
        # Partitioned input: provenance holds the event id it read; it moved if a later event of
        # this partition carries another data version than the one current at that point.
        read_up_to = provenance.input_storage_ids[parent]
        later = self._record(parent, partition, after=read_up_to)
        if later is None:
            return False
        if read_up_to is None:  # nothing was recorded when it ran; anything since is new
            return True
        then = self._record(parent, partition, before=read_up_to + 1)
        return _data_version(then) != _data_version(later)

    def needing_run(self, key: dg.AssetKey, partitions: Iterable[str | None]) -> dict[str | None, str]:
        return {p: reason for p in partitions if (reason := self.reason(key, p))}


def _data_version(record: dg.EventLogRecord | None) -> str | None:
    if record is None:
        return None
    event = record.asset_materialization or record.asset_observation
    return event.tags.get(DATA_VERSION_TAG)


class NeedsRun(dg.AutomationCondition):
    """Missing or unsynced (see the module docstring); stateless."""

    @property
    def name(self) -> str:
        return "missing_or_unsynced"

    def evaluate(self, context: dg.AutomationContext) -> dg.AutomationResult:
        node = context.asset_graph.get(context.key)
        if not node.is_materializable:
            return dg.AutomationResult(context, context.get_empty_subset())
        query = FreshnessQuery(context.asset_graph_view.instance, context.asset_graph)
        if node.is_partitioned:
            keys = context.candidate_subset.expensively_compute_partition_keys()
            stale = set(query.needing_run(context.key, keys))
            return dg.AutomationResult(
                context, context.candidate_subset.compute_intersection_with_partition_keys(stale)
            )
        stale = query.reason(context.key, None) is not None
        return dg.AutomationResult(context, context.candidate_subset if stale else context.get_empty_subset())


class InPartitions(dg.AutomationCondition):
    """Limits a condition to chosen chat files (the command line's targets)."""

    def __init__(self, keys: Iterable[str]):
        self.keys = set(keys)

    @property
    def name(self) -> str:
        return "in_partitions"

    def evaluate(self, context: dg.AutomationContext) -> dg.AutomationResult:
        if not context.asset_graph.get(context.key).is_partitioned:
            return dg.AutomationResult(context, context.candidate_subset)
        return dg.AutomationResult(
            context, context.candidate_subset.compute_intersection_with_partition_keys(self.keys)
        )


def ready_to_run() -> dg.AutomationCondition:
    """Needs a run, and no same-chat input is itself waiting for one (missing or unsynced and not
    requested in this same evaluation): a new chat is built in one run, while an edit moves one
    hop at a time, so a step whose output did not change stops the wave."""
    waiting_input = dg.AutomationCondition.any_deps_match(NeedsRun() & ~dg.AutomationCondition.will_be_requested())
    return NeedsRun() & ~waiting_input


def automated(condition: dg.AutomationCondition) -> dg.AutomationCondition:
    """What the daemon adds to the rule: never beside a run in progress, and a partition whose
    last run failed is retried only once one of its inputs or its code changed (a broken chat file
    is not re-run every minute; the fixed file is)."""
    retry = (
        ~dg.AutomationCondition.execution_failed()
        | dg.AutomationCondition.any_deps_updated()
        | dg.AutomationCondition.code_version_changed()
    )
    return (
        condition & ~dg.AutomationCondition.in_progress() & ~dg.AutomationCondition.any_deps_in_progress() & retry
    ).with_label("needs a run (missing or unsynced)")


PARTITION_AUTOMATION = automated(ready_to_run())
