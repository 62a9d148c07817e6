"""The runtime objects of ``narrative_mirror.assembly`` with the values the environment gives
(NM_HOME, NM_DEVICE, NM_LANCEDB_URI, the AWS_* and LLM variables), and the ``Memory`` of this
process. The Dagster resources (``resources/dagster_resources.py``) build through these, and so
do the command line's questions, the HTTP service and the benchmarks.

No Dagster here: a question on a chat whose memory is fresh is answered without loading it.
"""

from __future__ import annotations

from narrative_mirror import assembly, base_parts
from narrative_mirror.base_parts import index_store, lancedb_storage_options, llm_client  # noqa: F401
from narrative_mirror.home import Home
from resources import environment


def home() -> Home:
    """NM_HOME's layout."""
    return Home(environment.nm_home())


def embedder(model_name: str = "", batch_size: int = 0, device: str = "", adaptation: bool | None = None):
    """The embedder of config/embedding.toml on ``device`` (default NM_DEVICE, else auto)."""
    return base_parts.embedder(
        home(),
        model_name=model_name,
        batch_size=batch_size,
        device=device or environment.device(),
        adaptation=adaptation,
    )


def retriever(store, embedder, config: dict | None = None):
    """The retriever over ``store`` of NM_HOME's memory (``assembly.retriever``)."""
    return assembly.retriever(store, embedder, config, home=home())


def current_adaptation():
    """The home's current adaptation (narrative_mirror/adaptation/store.py), or None."""
    return base_parts.current_adaptation(home())


def adaptation_folder():
    """Where the home's adaptations are stored."""
    return home().adaptation


def event_log(retriever):
    """The retrieval event log in the retriever's LanceDB, its spool under NM_HOME."""
    return assembly.event_log(retriever, home())


def index_from_environment():
    """The index where NM_LANCEDB_URI says (default: under NM_HOME), with the AWS_* settings."""
    uri = environment.lancedb_uri() or str(home().lancedb)
    return index_store(
        uri,
        lancedb_storage_options(
            uri,
            environment.s3_endpoint(),
            environment.s3_region(),
            environment.value(environment.S3_ACCESS_KEY_ENV) or None,
            environment.value(environment.S3_SECRET_KEY_ENV) or None,
            environment.s3_allow_http(),
        ),
    )


def llm_from_environment():
    """The LLM client of OPENAI_* / NM_LLM_* (None: offline)."""
    llm = environment.llm_settings()
    return llm_client(llm.base_url, llm.api_key, llm.model, llm.timeout_s) if llm else None


def live_memory(retriever):
    """The live chats under NM_HOME, indexed into ``retriever``'s store."""
    return assembly.live_memory(home(), retriever)


def memory(builder=None, **parts):
    """This process's ``Memory``: NM_HOME, its index (NM_LANCEDB_URI), the embedder on NM_DEVICE
    and the LLM of OPENAI_* (offline without), each built when first used unless ``parts`` gives
    it (a server's warm objects); ``builder`` builds chats."""
    from narrative_mirror.front_door import Memory

    defaults = {"store": index_from_environment, "embedder": embedder, "llm": llm_from_environment}
    if parts.get("retriever") is not None:
        defaults.pop("store"), defaults.pop("embedder")
    return Memory(
        home(), builder=builder, dagster_elsewhere=environment.dagster_pg_url_env() is not None, **(defaults | parts)
    )
