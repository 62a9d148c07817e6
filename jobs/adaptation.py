"""The adaptation's job (run on command: UI, ``dagster job launch -j adaptation_job``) and the
sensor that launches it when embedding.toml's threshold says the home grew enough."""

from __future__ import annotations

import dagster as dg

from assets.adaptation.assets import adapted_embedder, stored_messages
from resources.dagster_resources import StateResource

adaptation_job = dg.define_asset_job(
    "adaptation_job",
    selection=[adapted_embedder],
    description="Train the embedder's adaptation to the home's chats (when due).",
)


@dg.sensor(
    job=adaptation_job,
    minimum_interval_seconds=3600,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Retrains the adaptation once the home has embedding.toml's retrain_growth more messages.",
)
def adaptation_sensor(context: dg.SensorEvaluationContext, state: StateResource):
    from narrative_mirror import settings
    from narrative_mirror.adaptation import store
    from resources import runtime

    section = settings.load_config("embedding").get("adaptation", {})
    if not section.get("enabled"):
        return dg.SkipReason("adaptation off (embedding.toml [adaptation] enabled = false)")
    messages = sum(f.height for f in stored_messages(context.instance, state))
    previous = store.current(runtime.adaptation_folder())
    if not messages or not store.needs_retrain(previous, messages, float(section.get("retrain_growth", 0.25))):
        return dg.SkipReason(f"{messages} messages; trained on {previous.messages if previous else 0}: not due")
    return dg.RunRequest(run_key=f"adapt-{messages}")


defs = dg.Definitions(jobs=[adaptation_job], sensors=[adaptation_sensor])
