"""How each runtime object is built: the embedder, the LanceDB index, the LLM client, the
retriever and its event log. The Dagster resources (``resources/dagster_resources.py``) build
through these, and so do the command line's questions, the HTTP service and the benchmarks.

No Dagster here: a question on a chat whose memory is fresh is answered without loading it.
"""

from __future__ import annotations

from narrative_mirror import settings
from resources import environment


def embedder(model_name: str = "", batch_size: int = 0, device: str = "", adaptation: bool | None = None):
    """The embedder of config/embedding.toml on ``device`` (default NM_DEVICE, else auto); a
    non-empty argument overrides the file. With ``[adaptation] enabled`` (or ``adaptation=True``)
    it loads the home's current adapted layers, once one is trained."""
    from narrative_mirror.embedding import Embedder

    config = settings.load_config("embedding")
    enabled = config.get("adaptation", {}).get("enabled", False) if adaptation is None else adaptation
    current = current_adaptation() if enabled else None
    return Embedder(model_name or config["model"], device=device or environment.device(),
                    batch_size=batch_size or int(config["batch_size"]),
                    adapted_layers=str(current.layers_path) if current else "",
                    adaptation=current.fingerprint if current else "",
                    backend=config.get("backend", "torch"), onnx_cache=str(environment.nm_home() / "models" / "onnx"))


def adaptation_folder():
    """Where the home's adaptations are stored: ``<NM_HOME>/adaptation``."""
    return environment.nm_home() / "adaptation"


def current_adaptation():
    """The home's current adaptation (narrative_mirror/adaptation/store.py), or None."""
    from narrative_mirror.adaptation import store

    return store.current(adaptation_folder())


def lancedb_storage_options(uri: str, endpoint: str | None = None, region: str | None = None,
                            access_key_id: str | None = None, secret_access_key: str | None = None,
                            allow_http: bool = False) -> dict[str, str] | None:
    """LanceDB's object-store options for a remote ``uri`` (None for a folder or when unset)."""
    if not settings.is_remote_uri(uri):
        return None
    options = {"aws_endpoint": endpoint, "aws_region": region,
               "aws_access_key_id": access_key_id, "aws_secret_access_key": secret_access_key,
               "allow_http": "true" if allow_http else None}
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
    return LLMClient(LLMSettings(base_url=base_url or None, api_key=api_key or LOCAL_API_KEY,
                                 model=model or DEFAULT_MODEL, timeout_s=timeout_s))


def retriever(store, embedder, config: dict | None = None):
    """The retriever over ``store``, encoding with ``embedder``, tuned by config/retrieval.toml
    (or ``config``)."""
    from narrative_mirror.retrieval.engine import Retriever

    return Retriever(store, embedder, config if config is not None else settings.load_config("retrieval"))


def event_log(retriever):
    """The retrieval event log, in the retriever's LanceDB (same place, same object-store options);
    its durable spool under NM_HOME (``events/spool``)."""
    from narrative_mirror.events.writer import EventLog

    store = retriever.store
    return EventLog(store.uri, embedder=retriever.embedder, storage_options=store.storage_options,
                    spool_dir=environment.nm_home() / "events" / "spool")


# -- outside Dagster: the same objects from the environment, as ``default_resources`` sets them up
def index_from_environment():
    """The index where NM_LANCEDB_URI says (default: under NM_HOME), with the AWS_* settings."""
    uri = environment.lancedb_uri() or str(environment.nm_home() / "lancedb")
    return index_store(uri, lancedb_storage_options(
        uri, environment.s3_endpoint(), environment.s3_region(),
        environment.value(environment.S3_ACCESS_KEY_ENV) or None,
        environment.value(environment.S3_SECRET_KEY_ENV) or None, environment.s3_allow_http()))


def llm_from_environment():
    """The LLM client of OPENAI_* / NM_LLM_* (None: offline)."""
    llm = environment.llm_settings()
    return llm_client(llm.base_url, llm.api_key, llm.model, llm.timeout_s) if llm else None


def live_memory(retriever):
    """The live chats' logs under NM_HOME (``live/``), indexed into ``retriever``'s store; the
    retriever's cached copy of a chat grows by the new rows (``memory.serving_memory``)."""
    from narrative_mirror.live.memory import serving_memory

    return serving_memory(environment.nm_home() / "live", retriever)
