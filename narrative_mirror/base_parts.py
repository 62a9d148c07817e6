"""The memory's base parts, built from explicit values: the embedder, the LanceDB index and the
LLM client. Apart from ``assembly`` (which adds the retriever, the event log and the live chats)
so that the layers' code versions reach only what encoding, indexing and summarizing run: a
retrieval change must not re-embed a chat."""

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
