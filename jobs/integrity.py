"""The daemon's integrity check: ``integrity_sensor`` runs the cheap check (assets/integrity.py)
over every chat file Dagster says is materialized, sets damaged outputs aside (drops an unreadable
table) and requests the rebuild of what is damaged with everything after it, one run per chat
file. Chats with a repair run still queued or running are left to it."""

from __future__ import annotations

import dagster as dg

from assets.integrity import check, prepare
from resources.dagster_resources import LanceDBResource, StateResource

MEMORY_GROUPS = ("ingest", "layers", "index")
SENSOR = "integrity_sensor"
ACTIVE = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


@dg.sensor(
    name=SENSOR,
    minimum_interval_seconds=300,
    default_status=dg.DefaultSensorStatus.RUNNING,
    asset_selection=dg.AssetSelection.groups(*MEMORY_GROUPS),
    description="Checks that every materialized parquet output is whole and each chat's index rows match "
    "its last index build; requests the rebuild of what is damaged.",
)
def integrity_sensor(context: dg.SensorEvaluationContext, lancedb: LanceDBResource, state: StateResource):
    graph = context.repository_def.asset_graph
    in_groups = dg.AssetSelection.groups(*MEMORY_GROUPS).resolve(graph)
    selection = [key.to_user_string() for key in graph.toposorted_asset_keys if key in in_groups]
    instance = context.instance
    chats = sorted(set().union(*(instance.get_materialized_partitions(dg.AssetKey(a)) for a in selection)))
    repairing = {
        run.tags.get("dagster/partition")
        for run in instance.get_runs(filters=dg.RunsFilter(tags={"dagster/sensor_name": SENSOR}, statuses=ACTIVE))
    }
    chats = [chat for chat in chats if chat not in repairing]
    store = lancedb.get()
    findings = check(instance, state, store, chats, selection)
    if not findings:
        return dg.SkipReason(f"{len(chats)} chat file(s): every materialized output is whole")
    repair = prepare(
        findings,
        instance=instance,
        state=state,
        store=store,
        graph=graph,
        selection=selection,
        keys=chats,
        say=context.log.warning,
    )
    return [
        dg.RunRequest(
            asset_selection=[dg.AssetKey(a) for a in assets],
            partition_key=chat,
            tags={"narrative_mirror/repair": "; ".join(f.reason for f in findings if f.chat in (chat, None))[:1000]},
        )
        for chat, assets in repair.items()
    ]


defs = dg.Definitions(sensors=[integrity_sensor])
