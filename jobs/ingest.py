"""Registering chat files as partitions and requesting their ingestion."""


import hashlib

import dagster as dg

from assets.ingest import INGEST_ASSETS
from assets.partitions import chat_files
from resources import ChatDataResource

ingest_job = dg.define_asset_job(
    "ingest_job",
    selection=dg.AssetSelection.assets(*INGEST_ASSETS),
    description="Read chat files: messages, gold QA and ARC cases of one chat file.",
)


def _file_digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


@dg.sensor(
    job=ingest_job,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Registers chat files found in the data folder as partitions and ingests new or changed ones.",
)
def chat_files_sensor(context: dg.SensorEvaluationContext, chat_data: ChatDataResource) -> dg.SensorResult:
    from narrative_mirror.keys import find_chat_files

    files, problems = find_chat_files(chat_data.data_path())
    for problem in problems:
        context.log.warning(f"skipped: {problem}")
    known = set(context.instance.get_dynamic_partitions(chat_files.name))
    new_keys = sorted(set(files) - known)
    gone = sorted(known - set(files))
    if gone:
        # Removing a file never deletes what was stored for it; say so instead.
        context.log.info(f"chat files no longer in {chat_data.data_path()} (results kept): {gone}")
    # run_key includes the content hash: an edited file is ingested again, an unchanged one never.
    run_requests = [
        dg.RunRequest(partition_key=key, run_key=f"{key}:{_file_digest(path)}")
        for key, path in sorted(files.items())
    ]
    return dg.SensorResult(
        run_requests=run_requests,
        dynamic_partitions_requests=[chat_files.build_add_request(new_keys)] if new_keys else [],
    )
