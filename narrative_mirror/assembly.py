"""How each runtime object of a memory is built from explicit values: the embedder, the LanceDB
index, the LLM client, the retriever, its event log and the live chats. ``Memory`` builds through
these; so do the Dagster resources and the environment's door (``resources/runtime.py``), which
only add the values read from the environment."""

from __future__ import annotations

from narrative_mirror import settings
from narrative_mirror.home import Home


def current_adaptation(home: Home):
    """The home's current adaptation (narrative_mirror/adaptation/store.py), or None."""
    from narrative_mirror.adaptation import store

    return store.current(home.adaptation)


def embedder(
    home: Home, *, model_name: str = "", batch_size: int = 0, device: str = "auto", adaptation: bool | None = None
):
    """The embedder of config/embedding.toml on ``device``; a non-empty argument overrides the
    file. With ``[adaptation] enabled`` (or ``adaptation=True``) it loads the home's current
    adapted layers, once one is trained."""
    from narrative_mirror.embedding import Embedder

    config = settings.load_config("embedding")
    enabled = config.get("adaptation", {}).get("enabled", False) if adaptation is None else adaptation
    current = current_adaptation(home) if enabled else None
    return Embedder(
        model_name or config["model"],
        device=device,
        batch_size=batch_size or int(config["batch_size"]),
        adapted_layers=str(current.layers_path) if current else "",
        adaptation=current.fingerprint if current else "",
        backend=config.get("backend", "torch"),
        onnx_cache=str(home.onnx_cache),
    )


def lancedb_storage_options(
    uri: str,
    endpoint: str | None = None,
    region: str | None = None,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    allow_http: bool = False,
) -> dict[str, str] | None:
    """LanceDB's object-store options for a remote ``uri`` (None for a folder or when unset)."""
    if not settings.is_remote_uri(uri):
        return None
    options = {
        "aws_endpoint": endpoint,
        "aws_region": region,
        "aws_access_key_id": access_key_id,
        "aws_secret_access_key": secret_access_key,
        "allow_http": "true" if allow_http else None,
    }
    return {k: v for k, v in options.items() if v} or None


def index_store(uri: str, storage_options: dict[str, str] | None = None):
    """The LanceDB index at ``uri`` (a folder, or object storage with ``storage_options``)."""
    from narrative_mirror.index_store import IndexStore

    return IndexStore(uri, storage_options=storage_options)


def llm_client(base_url: str | None, api_key: str | None, model: str | None, timeout_s: float):
    """The client of an OpenAI-compatible endpoint; None (offline) with no URL and no key."""
    from narrative_mirror.llm import DEFAULT_MODEL, LOCAL_API_KEY, LLMClient, LLMSettings

    if not base_url and not api_key:
        return None
    return LLMClient(
        LLMSettings(
            base_url=base_url or None,
            api_key=api_key or LOCAL_API_KEY,
            model=model or DEFAULT_MODEL,
            timeout_s=timeout_s,
        )
    )


def retriever(store, embedder, config: dict | None = None):
    """The retriever over ``store``, encoding with ``embedder``, tuned by config/retrieval.toml
    (or ``config``)."""
    from narrative_mirror.retrieval.engine import Retriever

    return Retriever(store, embedder, config if config is not None else settings.load_config("retrieval"))


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
