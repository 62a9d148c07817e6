"""Evaluation operations: the nightly train schedule, the explicit test backfill, and alerts."""

import json
import os
from datetime import datetime, timezone

import dagster as dg

from assets.evaluation import EVAL_ASSETS, TEST_TAG, arc_eval, qa_eval
from assets.partitions import chat_files
from narrative_mirror import settings
from narrative_mirror import split as split_lib

train_eval_job = dg.define_asset_job(
    "train_eval_job", selection=dg.AssetSelection.assets(qa_eval, arc_eval),
    tags={TEST_TAG: "train"}, description="QA and ARC evaluation of one TRAIN chat file.",
)

# The only way test partitions get evaluated: launch this job as a backfill over exactly the
# test keys (`narrative-mirror backfill-test` prints/launches it); its runs carry the test tag.
test_eval_job = dg.define_asset_job(
    "test_eval_job", selection=dg.AssetSelection.assets(qa_eval, arc_eval),
    tags={TEST_TAG: "test"}, description="QA and ARC evaluation of TEST chat files (explicit backfill only).",
)


@dg.schedule(cron_schedule="0 3 * * *", job=train_eval_job, default_status=dg.DefaultScheduleStatus.RUNNING,
             description="Nightly evaluation of every train chat file (test files are never requested).")
def nightly_train_eval(context: dg.ScheduleEvaluationContext):
    keys = context.instance.get_dynamic_partitions(chat_files.name)
    day = context.scheduled_execution_time.strftime("%Y%m%d") if context.scheduled_execution_time else "now"
    for key in split_lib.keys_in(split_lib.TRAIN, keys):
        yield dg.RunRequest(partition_key=key, run_key=f"{day}:{key}")


def test_partition_keys(instance: dg.DagsterInstance) -> list[str]:
    return split_lib.keys_in(split_lib.TEST, instance.get_dynamic_partitions(chat_files.name))


def alerts_path():
    return settings.nm_home() / "alerts" / "alerts.jsonl"


def record_alert(record: dict) -> None:
    path = alerts_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")


@dg.run_failure_sensor(default_status=dg.DefaultSensorStatus.RUNNING,
                       monitored_jobs=[train_eval_job, test_eval_job], monitor_all_code_locations=False,
                       description="Turns failed evaluation runs (e.g. a blocking recall regression) into alerts.")
def eval_failure_alert_sensor(context: dg.RunFailureSensorContext):
    run = context.dagster_run
    failed_checks = []
    for event in context.instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
        data = event.dagster_event.event_specific_data
        if not data.passed:
            failed_checks.append(f"{data.asset_key.to_user_string()}:{data.check_name}")
    record = {
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "run_id": run.run_id,
        "job": run.job_name,
        "partition": run.tags.get("dagster/partition"),
        "failed_checks": failed_checks,
        "message": context.failure_event.message or "",
    }
    record_alert(record)
    token = os.environ.get("SLACK_BOT_TOKEN")
    if token:
        from dagster_slack import SlackResource

        channel = os.environ.get("NM_SLACK_CHANNEL", "#narrative-mirror")
        text = f"Evaluation run {run.run_id[:8]} failed ({record['partition']}): {', '.join(failed_checks) or record['message']}"
        SlackResource(token=token).get_client().chat_postMessage(channel=channel, text=text)


EVAL_JOBS = [train_eval_job, test_eval_job]
