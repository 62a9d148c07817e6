"""The automation of a chat file's memory: ingest, layers and index kept in step with their
inputs by Declarative Automation (the rule is assets/freshness.py, shared with the command line)."""

import dagster as dg

# Ingest, layers and index in one sensor: an edited chat file flows from messages to the index.
# Runs in the code server because the freshness rule is Python of ours.
memory_automation_sensor = dg.AutomationConditionSensorDefinition(
    "memory_automation_sensor",
    target=dg.AssetSelection.groups("ingest", "layers", "index"),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=30,
    use_user_code_server=True,
)
