"""How each runtime object of a memory is built from explicit values: the embedder, the LanceDB
index, the LLM client, the retriever, its event log and the live chats. ``Memory`` builds through
these; so do the Dagster resources and the environment's door (``resources/runtime.py``), which
only add the values read from the environment."""

from __future__ import annotations

from narrative_mirror import settings
from narrative_mirror.base_parts import current_adaptation, embedder, index_store, lancedb_storage_options, llm_client  # noqa: F401 - the base parts, built here too
from narrative_mirror.home import Home


def retriever(store, embedder, config: dict | None = None, home: Home | None = None):
    """The retriever over ``store``, encoding with ``embedder``, tuned by config/retrieval.toml
    (or ``config``), of the memory of ``home`` (its stored layers and model cache)."""
    from narrative_mirror.retrieval.engine import Retriever

    return Retriever(store, embedder, config if config is not None else settings.load_config("retrieval"), home=home)


def event_log(retriever, home: Home):
    """The retrieval event log, in the retriever's LanceDB (same place, same object-store options);
    its durable spool under the home."""
    from narrative_mirror.events.writer import EventLog

    store = retriever.store
    return EventLog(
        store.uri, embedder=retriever.embedder, storage_options=store.storage_options, spool_dir=home.event_spool
    )


def live_memory(home: Home, retriever):
    """The home's live chats, indexed into ``retriever``'s store; the retriever's cached copy of a
    chat grows by the new rows (``memory.serving_memory``)."""
    from narrative_mirror.live.memory import serving_memory

    return serving_memory(home.live, retriever)


def forgetting(home: Home, store, *, dagster_elsewhere: bool = False, **options):
    """The home's forgets of live messages, over the index ``store`` (``options``: those of
    ``Forgetting``: runs_root, spool_dir, flush_events, on_changed)."""
    from narrative_mirror.live.forget import Forgetting
    from narrative_mirror.live.log import LiveLog

    return Forgetting(LiveLog(home.live), store, home.root, dagster_elsewhere=dagster_elsewhere, **options)
