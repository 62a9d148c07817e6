"""Jobs of the events domain: ``maintain_job`` removes recall-run files and retrieval events older
than ``retention.toml`` says (nothing when no retention is set), nightly."""

import dagster as dg

from narrative_mirror.home import Home
from resources.dagster_resources import LanceDBResource, StateResource


@dg.op(
    description="Remove recall-run files and retrieval events older than retention.toml's keep_days "
    "(a kind without keep_days is kept) and report how much was removed."
)
def prune_by_age(context: dg.OpExecutionContext, lancedb: LanceDBResource, state: StateResource) -> dg.Output[dict]:
    from narrative_mirror.maintenance import prune
    from narrative_mirror.retention import load_retention

    report = prune(
        Home(state.root).recall_runs,
        lancedb.resolved_uri(),
        load_retention(),
        storage_options=lancedb.storage_options(),
    )
    runs, events = report["recall_runs"], report["retrieval_events"]
    context.log.info(
        f"recall runs (keep_days {runs['keep_days']}): {runs['removed_files']} files removed; "
        f"retrieval events (keep_days {events['keep_days']}): {events['removed']} removed"
    )
    return dg.Output(
        report,
        metadata={
            "recall_runs_removed_files": dg.MetadataValue.int(runs["removed_files"]),
            "recall_runs_removed_bytes": dg.MetadataValue.int(runs["removed_bytes"]),
            "retrieval_events_removed": dg.MetadataValue.int(events["removed"]),
            "keep_days": dg.MetadataValue.json(
                {"recall_runs": runs["keep_days"], "retrieval_events": events["keep_days"]}
            ),
        },
    )


@dg.job(description="Retention: remove recall-run files and retrieval events older than retention.toml says.")
def maintain_job():
    prune_by_age()


maintain_schedule = dg.ScheduleDefinition(
    job=maintain_job,
    cron_schedule="45 4 * * *",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Nightly retention (prunes nothing unless retention.toml sets keep_days).",
)


defs = dg.Definitions(jobs=[maintain_job], schedules=[maintain_schedule])
