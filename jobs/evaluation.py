"""Jobs of the evaluation domain: the train and test evaluation jobs, the nightly train
schedule, and the alert sensor for evaluation runs that failed."""

import dagster as dg

from assets.evaluation.assets import EVAL_ASSETS, TEST_TAG, arc_eval, eval_summary, profile_protocol, qa_eval
from assets.partitions import chat_files
from narrative_mirror import split as split_lib
from resources.dagster_resources import AlertsResource

train_eval_job = dg.define_asset_job(
    "train_eval_job",
    selection=dg.AssetSelection.assets(qa_eval, arc_eval),
    tags={TEST_TAG: "train"},
    description="QA and ARC evaluation of one TRAIN chat file.",
)
eval_summary_job = dg.define_asset_job(
    "eval_summary_job",
    selection=dg.AssetSelection.assets(eval_summary),
    description="Train and test aggregates of the evaluations under the current config; the experiment log.",
)
profile_protocol_job = dg.define_asset_job(
    "profile_protocol_job",
    selection=dg.AssetSelection.assets(profile_protocol),
    description="The agentic-RAG design's protocol: the train questions under the fast, balanced and deep profiles.",
)

# The only way test partitions get evaluated: launch this job as a backfill over exactly the
# test keys (`narrative-mirror backfill-test` prints/launches it); its runs carry the test tag.
test_eval_job = dg.define_asset_job(
    "test_eval_job",
    selection=dg.AssetSelection.assets(qa_eval, arc_eval),
    tags={TEST_TAG: "test"},
    description="QA and ARC evaluation of TEST chat files (explicit backfill only).",
)


@dg.schedule(
    cron_schedule="0 3 * * *",
    job=train_eval_job,
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Nightly evaluation of every train chat file (test files are never requested).",
)
def nightly_train_eval(context: dg.ScheduleEvaluationContext):
    keys = context.instance.get_dynamic_partitions(chat_files.name)
    day = context.scheduled_execution_time.strftime("%Y%m%d") if context.scheduled_execution_time else "now"
    for key in split_lib.keys_in(split_lib.TRAIN, keys):
        yield dg.RunRequest(partition_key=key, run_key=f"{day}:{key}")


EVAL_KEYS = {a.key for a in EVAL_ASSETS}


@dg.run_failure_sensor(
    default_status=dg.DefaultSensorStatus.RUNNING,
    monitor_all_code_locations=False,
    description="Alerts on evaluation runs that failed for a reason other than a failed check "
    "(the evaluation assets report failed checks themselves, whoever ran them).",
)
def eval_failure_alert_sensor(context: dg.RunFailureSensorContext, alerts: AlertsResource):
    run = context.dagster_run
    if not (set(run.asset_selection or ()) & EVAL_KEYS):
        return
    failed_checks = [
        e
        for e in context.instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
        if not e.dagster_event.event_specific_data.passed
    ]
    if failed_checks:
        return  # already alerted by the asset that produced the check
    message = context.failure_event.message or "run failed"
    alerts.send(
        {
            "run_id": run.run_id,
            "job": run.job_name,
            "partition": run.tags.get("dagster/partition"),
            "check": None,
            "severity": "ERROR",
            "description": message,
        },
        text=f"Evaluation run {run.run_id[:8]} failed ({run.tags.get('dagster/partition')}): {message}",
    )


defs = dg.Definitions(
    jobs=[train_eval_job, test_eval_job, eval_summary_job, profile_protocol_job],
    schedules=[nightly_train_eval],
    sensors=[eval_failure_alert_sensor],
)
