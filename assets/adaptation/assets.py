"""The embedder adapted to the home's chats: the top layers of the shipped model trained on the
stored messages of every chat file (pairs of messages; never questions, answers or gold), kept
under ``<NM_HOME>/adaptation`` and named by its fingerprint.

Not part of the per-chat automation (a new message does not retrain): it runs on command
(``adaptation_job``) or when ``adaptation_sensor`` sees the home grew by ``retrain_growth``.
A retrain moves embedding_config's observed version, so every chat's message_embeddings and
what reads them are re-run by the normal freshness rule; messages and everything upstream stay."""

import time

import dagster as dg

from assets.adaptation.checks import ADAPTATION_CHECK_SPECS, held_out_loss_fell
from assets.partitions import chat_files
from assets.versioning import EMBEDDER_POOL, versioned_asset
from resources.dagster_resources import EmbedderResource, StateResource


class AdaptationConfig(dg.Config):
    force: bool = False  # retrain now, whatever the growth threshold says


def stored_messages(instance: dg.DagsterInstance, state: StateResource) -> list:
    """The stored ``messages`` frame of every chat file of the instance."""
    frames = (state.stored_frame("messages", key) for key in instance.get_dynamic_partitions(chat_files.name))
    return [frame for frame in frames if frame is not None]


@versioned_asset(group_name="adaptation", pool=EMBEDDER_POOL, kinds={"pytorch"}, check_specs=ADAPTATION_CHECK_SPECS)
def adapted_embedder(
    context: dg.AssetExecutionContext, config: AdaptationConfig, embedder: EmbedderResource, state: StateResource
):
    """The current adaptation (its fingerprint is the data version): trained again when
    ``embedding.toml [adaptation]`` is on and the home has ``retrain_growth`` more messages than
    the current one was trained on (or ``force``), else kept."""
    from narrative_mirror import settings
    from narrative_mirror.adaptation import store
    from narrative_mirror.adaptation.training import AdaptationSettings
    from narrative_mirror.embedding import fresh_model
    from resources import runtime

    section = settings.load_config("embedding").get("adaptation", {})
    if not section.get("enabled"):
        yield dg.MaterializeResult(data_version=dg.DataVersion("off"), metadata={"enabled": False})
        yield held_out_loss_fell(None)
        return
    frames = stored_messages(context.instance, state)
    messages = sum(frame.height for frame in frames)
    folder = runtime.adaptation_folder()
    previous = store.current(folder)
    model = embedder.get()
    retrain = config.force or store.needs_retrain(previous, messages, float(section.get("retrain_growth", 0.25)))
    started = time.perf_counter()
    if retrain:
        adaptation = store.adapt(
            frames,
            AdaptationSettings.from_config(section),
            folder,
            model.model_name,
            device=model.device,
            load_model=lambda: fresh_model(model.model_name, model.device),
            log=context.log.info,
        )
    else:
        adaptation = previous
    moved = previous is None or adaptation.fingerprint != previous.fingerprint
    if moved:
        context.log.info(
            f"adaptation {adaptation.fingerprint} is current: every chat's message vectors are stale "
            "and are re-encoded by the next build"
        )
    yield dg.MaterializeResult(
        data_version=dg.DataVersion(adaptation.fingerprint),
        metadata={
            "enabled": True,
            "fingerprint": adaptation.fingerprint,
            "retrained": moved,
            "messages_now": dg.MetadataValue.int(messages),
            "messages_trained_on": dg.MetadataValue.int(adaptation.messages),
            "pairs": dg.MetadataValue.int(int(adaptation.meta["pairs"])),
            "seconds": round(time.perf_counter() - started, 2),
            "report": dg.MetadataValue.json(adaptation.meta["report"]),
        },
    )
    yield held_out_loss_fell(adaptation)


ADAPTATION_ASSETS = [adapted_embedder]
