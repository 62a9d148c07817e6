"""The sensor that watches the data folder: new chat files become partitions, changed source
files (chats, ARC cases, config, prompts) get a new observed version."""

import dagster as dg

from assets.partitions import chat_files
from assets.sources.assets import observe_sources
from resources.dagster_resources import ChatDataResource


@dg.sensor(
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Registers chat files of the data folder as partitions and records the versions of changed "
    "source files (chats, ARC cases, config, prompts); the automation sensors do the rest.",
)
def source_files_sensor(context: dg.SensorEvaluationContext, chat_data: ChatDataResource) -> dg.SensorResult:
    found = observe_sources(context.instance, chat_data)
    for problem in found.problems:
        context.log.warning(f"skipped: {problem}")
    gone = sorted(set(context.instance.get_dynamic_partitions(chat_files.name)) - set(found.files))
    if gone:
        # Removing a file never deletes what was stored for it; say so instead.
        context.log.info(f"chat files no longer in {chat_data.data_path()} (results kept): {gone}")
    return dg.SensorResult(
        dynamic_partitions_requests=[chat_files.build_add_request(found.new_keys)] if found.new_keys else [],
        asset_events=found.observations,
    )


defs = dg.Definitions(sensors=[source_files_sensor])
