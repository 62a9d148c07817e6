"""Dagster resources: the asset graph's door to the outside world.

Paths, the chat folder, the LLM endpoint, Slack and the evaluation profile reach assets,
sensors and checks only through these resources; ``default_resources`` takes the environment
(``resources/environment.py``, the only reader) once, where the Definitions are built. The
runtime objects they hand out are built by ``resources/runtime.py``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import polars as pl

from narrative_mirror import settings, storage
from narrative_mirror.exports.folder import NATIVE, ChatSource, ImportOptions, remembered_options
from narrative_mirror.home import Home
from narrative_mirror.live.source import LIVE_FORMAT, find_chats
from resources import environment
from resources.alert_delivery import SLACK_API_URL, post_to_slack
from resources.runtime import embedder as build_embedder
from resources.runtime import index_store, lancedb_storage_options, llm_client


class StateResource(dg.ConfigurableResource):
    """NM_HOME: the root of everything stored (parquet outputs, LanceDB, logs, alerts)."""

    home: str

    @property
    def root(self) -> Path:
        return Path(self.home).expanduser()

    @property
    def storage_dir(self) -> Path:
        return Home(self.root).storage

    @property
    def lancedb_uri(self) -> str:
        return str(Home(self.root).lancedb)

    @property
    def experiments_log(self) -> Path:
        return Home(self.root).experiments

    @property
    def alerts_log(self) -> Path:
        return Home(self.root).alerts

    @property
    def exports_dir(self) -> Path:
        return Home(self.root).exports

    def frame_path(self, asset: str, partition: str | None) -> Path:
        return storage.frame_path(self.storage_dir, asset, partition)

    def stored_frame(self, asset: str, partition: str | None) -> pl.DataFrame | None:
        """The stored output of ``asset`` for ``partition``, or None when there is none."""
        path = self.frame_path(asset, partition)
        return storage.read_frame(path) if path.is_file() else None


class ParquetIOManager(dg.ConfigurableIOManager):
    """Stores polars frames as ``<NM_HOME>/storage/<asset>/<partition>.parquet``.

    Written atomically (temp file + rename), so a failed run never replaces a good output.
    Kept in-house because dagster-polars is broken on polars 2.x.
    """

    state: StateResource

    def _path(self, asset_key: dg.AssetKey, partition: str | None) -> Path:
        return self.state.frame_path("__".join(asset_key.path), partition)

    def handle_output(self, context: dg.OutputContext, obj: pl.DataFrame) -> None:
        if obj is None:
            return
        if not isinstance(obj, pl.DataFrame):
            raise TypeError(
                f"{context.asset_key.to_user_string()}: expected a polars DataFrame, got {type(obj).__name__}"
            )
        partition = context.partition_key if context.has_asset_partitions else None
        path = self._path(context.asset_key, partition)
        storage.write_frame(path, obj)
        context.add_output_metadata({"path": dg.MetadataValue.path(str(path))})

    def load_input(self, context: dg.InputContext) -> pl.DataFrame | dict[str, pl.DataFrame]:
        key = context.asset_key
        if context.has_asset_partitions:
            keys = context.asset_partition_keys
            if len(keys) == 1:
                return storage.read_frame(self._path(key, keys[0]))
            return {k: storage.read_frame(self._path(key, k)) for k in keys}
        return storage.read_frame(self._path(key, None))


class ChatDataResource(dg.ConfigurableResource):
    """Where chats and ARC case files are read from ("" = the packaged demo data), and how chat
    exports in that folder are read (forced format, zone of local times, WhatsApp day order;
    ``machine_tz``: the machine's zone, the default; ``cache_dir``: what parsing found; ``home``: the
    NM_HOME whose live chats join the folder's, "" for none)."""

    data_dir: str = ""
    arcs_dir: str = ""
    export_format: str = ""
    tz: str = ""
    day_first: str = ""  # "", "true" or "false"
    machine_tz: str = ""
    cache_dir: str = ""
    home: str = ""

    def data_path(self) -> Path:
        return Path(self.data_dir).expanduser().resolve() if self.data_dir else settings.DEMO_DATA_DIR

    def arcs_path(self) -> Path | None:
        if self.arcs_dir:
            return Path(self.arcs_dir).expanduser().resolve()
        return settings.default_arcs_dir(self.data_path())

    def import_options(self) -> ImportOptions:
        from narrative_mirror.layers.sessions import session_gap

        return ImportOptions(
            format=self.export_format or None,
            tz=self.tz or None,
            day_first={"true": True, "false": False}.get(self.day_first),
            machine_tz=self.machine_tz or None,
            session_gap_hours=session_gap(settings.load_config("layers")).total_seconds() / 3600,
        )

    def chat_sources(self, progress=None) -> tuple[dict[str, ChatSource], list[str]]:
        """Every chat of the data folder by partition key, and problem lines (exports/folder.py)."""
        return find_chats(
            self.data_path(),
            self.import_options(),
            Path(self.cache_dir) if self.cache_dir else None,
            progress,
            Path(self.home) if self.home else None,
        )

    def chat_files(self) -> dict[str, Path]:
        return {key: source.path for key, source in self.chat_sources()[0].items()}

    def chat_source(self, key: str) -> ChatSource:
        sources = self.chat_sources()[0]
        if key not in sources:
            raise FileNotFoundError(
                f"chat file for partition {key!r} is not in {self.data_path()} "
                f"(known: {', '.join(sorted(sources)) or 'none'}); stored results are kept"
            )
        return sources[key]

    def chat_path(self, key: str) -> Path:
        return self.chat_source(key).path

    def read_chat(self, key: str):
        """The chat of partition ``key``: a chat file, or one conversation of an export."""
        from narrative_mirror.chats import load_chat
        from narrative_mirror.exports.frames import load_export_chat

        source = self.chat_source(key)
        if source.format in (NATIVE, LIVE_FORMAT):
            return load_chat(source.path, chat_file=key)
        return load_export_chat(source, self.import_options())


class EmbedderResource(dg.ConfigurableResource):
    """The embedder of config/embedding.toml (the ``embedding_config`` source asset tracks it);
    a non-empty field overrides the file."""

    model_name: str = ""
    batch_size: int = 0
    device: str = "auto"  # NM_DEVICE: auto, cpu or cuda

    def get(self):
        return build_embedder(self.model_name, self.batch_size, self.device)


class LanceDBResource(dg.ConfigurableResource):
    """The LanceDB index: ``<NM_HOME>/lancedb`` on this machine, or ``uri`` (e.g.
    ``s3://bucket/prefix``) shared by workers on several machines, with the object store's
    endpoint, region and keys (unset: LanceDB's own defaults, the AWS_* variables and roles)."""

    state: StateResource
    uri: str = ""
    endpoint: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    allow_http: bool = False

    def resolved_uri(self) -> str:
        return self.uri or self.state.lancedb_uri

    def storage_options(self) -> dict[str, str] | None:
        """LanceDB's object-store options for a remote ``uri`` (None for a folder or when unset)."""
        return lancedb_storage_options(
            self.resolved_uri(), self.endpoint, self.region, self.access_key_id, self.secret_access_key, self.allow_http
        )

    def get(self):
        return index_store(self.resolved_uri(), self.storage_options())


class LLMResource(dg.ConfigurableResource):
    """An OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp); no URL and no key = offline."""

    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    timeout_s: float = 30.0

    def get(self):
        return llm_client(self.base_url, self.api_key, self.model, self.timeout_s)


class EvaluationResource(dg.ConfigurableResource):
    """config/evaluation.toml; the agent profile an evaluation run asks for (its run config,
    assets/evaluation/run_config.py) overrides the configured one."""

    def config(self, profile: str = "") -> dict:
        from narrative_mirror import evaluation as ev

        return ev.load_eval_config(profile=profile or None)


class AlertsResource(dg.ConfigurableResource):
    """Where regressions are reported: always the alert log under NM_HOME, and Slack when a
    bot token is configured."""

    state: StateResource
    slack_token: str | None = None
    slack_channel: str = "#narrative-mirror"
    slack_api_url: str = SLACK_API_URL

    def send(self, record: dict, text: str) -> dict:
        """Post ``text`` to Slack if configured (retried; a failure is recorded, never raised), then
        append ``record`` (plus the time and ``slack``: delivered / failed ... / not configured)
        to the alert log."""
        from narrative_mirror.storage import append_jsonl

        delivery = (
            post_to_slack(self.slack_token, self.slack_channel, text, self.slack_api_url)
            if self.slack_token
            else "not configured"
        )
        record = {"time": datetime.now(UTC).isoformat(timespec="seconds"), **record, "slack": delivery}
        append_jsonl(self.state.alerts_log, record)
        return record

    def read(self) -> list[dict]:
        path = self.state.alerts_log
        if not path.is_file():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def resolved(resource: dg.ConfigurableResource) -> dg.ConfigurableResource:
    """``resource`` as a run sees it, its ``EnvVar`` fields replaced by their values (the
    resources of ``default_resources`` keep the variables: definitions show names, not values).
    For code that uses a resource outside a run: the command line, the HTTP service."""
    fields = {name: getattr(resource, name) for name in type(resource).model_fields}
    return resource.model_copy(
        update={name: value.get_value() for name, value in fields.items() if isinstance(value, dg.EnvVar)}
    )


def _env(name: str, default=None):
    """An ``EnvVar`` when the variable is set (resolved where the run executes, shown as such in
    the UI), else the default: unset settings mean "not configured", not an error."""
    return dg.EnvVar(name) if environment.is_set(name) else default


def lancedb_resource(state: StateResource) -> LanceDBResource:
    """The index where NM_LANCEDB_URI says (default: under NM_HOME), with the object store's
    settings from the standard AWS_* variables (the keys as ``EnvVar``: resolved where the step
    runs, never stored with the run)."""
    return LanceDBResource(
        state=state,
        uri=environment.lancedb_uri(),
        endpoint=environment.s3_endpoint(),
        region=environment.s3_region(),
        access_key_id=_env(environment.S3_ACCESS_KEY_ENV),
        secret_access_key=_env(environment.S3_SECRET_KEY_ENV),
        allow_http=environment.s3_allow_http(),
    )


def chat_data_resource(
    state: StateResource, data_dir: str = "", arcs_dir: str = "", import_options: ImportOptions | None = None
) -> ChatDataResource:
    """The chat folder and how its exports are read: the command's flags (``import_options``,
    then remembered for the folder on this home), else what was remembered, else the defaults
    with the machine's zone (TZ, /etc/localtime)."""
    data = data_dir or environment.value(environment.DATA_DIR_ENV)
    folder = Path(data).expanduser().resolve() if data else settings.DEMO_DATA_DIR
    options = remembered_options(state.root, folder, import_options, environment.machine_zone())
    return ChatDataResource(
        data_dir=data,
        arcs_dir=arcs_dir or environment.value(environment.ARCS_DIR_ENV),
        export_format=options.format or "",
        tz=options.tz or "",
        day_first="" if options.day_first is None else str(options.day_first).lower(),
        machine_tz=options.machine_tz or "",
        cache_dir=str(Home(state.root).import_scans),
        home=str(state.root),
    )


def default_resources(
    data_dir: str = "", arcs_dir: str = "", nm_home: str = "", import_options: ImportOptions | None = None
) -> dict:
    """The resources of a process: explicit arguments first, then the environment
    (NM_HOME, NM_DATA_DIR, NM_ARCS_DIR, NM_DEVICE, TZ, OPENAI_*, NM_LLM_*, SLACK_BOT_TOKEN,
    NM_SLACK_CHANNEL, NM_LANCEDB_URI and the AWS_* object-store settings)."""
    environment.hand_to_library()
    state = StateResource(home=str(Path(nm_home).expanduser().resolve()) if nm_home else str(environment.nm_home()))
    llm_settings = environment.llm_settings()  # validates NM_LLM_TIMEOUT once, here
    return {
        "state": state,
        "io_manager": ParquetIOManager(state=state),
        "chat_data": chat_data_resource(state, data_dir, arcs_dir, import_options),
        "embedder": EmbedderResource(device=environment.device()),
        "lancedb": lancedb_resource(state),
        "llm": LLMResource(
            base_url=_env(environment.LLM_BASE_URL_ENV),
            api_key=_env(environment.LLM_API_KEY_ENV),
            model=_env(environment.LLM_MODEL_ENV),
            timeout_s=llm_settings.timeout_s if llm_settings else 30.0,
        ),
        "evaluation": EvaluationResource(),
        "alerts": AlertsResource(
            state=state, slack_token=_env(environment.SLACK_TOKEN_ENV), slack_channel=environment.slack_channel()
        ),
    }
