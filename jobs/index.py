"""Jobs of the index domain: the LanceDB store's upkeep (compaction, full-text index, old
versions) and its nightly schedule."""

import dagster as dg

from resources.dagster_resources import LanceDBResource


@dg.op(
    description="Compact the LanceDB tables, bring their full-text indexes up to date and remove old "
    "versions (chat writes leave one small file and one version each)."
)
def maintain_index(context: dg.OpExecutionContext, lancedb: LanceDBResource) -> dg.Output[dict]:
    report = lancedb.get().maintain()
    for table, after in report["after"].items():
        context.log.info(f"{table}: {report['before'][table]} -> {after}")
    return dg.Output(
        report,
        metadata={
            f"{table}/{key}": dg.MetadataValue.int(value)
            for table, health in report["after"].items()
            for key, value in health.items()
        },
    )


@dg.job(description="LanceDB upkeep: compaction, full-text index update, old-version cleanup.")
def index_maintenance_job():
    maintain_index()


index_maintenance_schedule = dg.ScheduleDefinition(
    job=index_maintenance_job,
    cron_schedule="30 4 * * *",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Nightly LanceDB upkeep (after the nightly train evaluation).",
)


defs = dg.Definitions(jobs=[index_maintenance_job], schedules=[index_maintenance_schedule])
