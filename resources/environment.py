"""The one place the process environment is read: every variable the project understands.

Dagster resources take what they need from here as ``EnvVar`` fields or plain values
(``resources/dagster_resources.py``); the command line, the benchmarks and the instance code call
these functions; the library (``narrative_mirror/``) never reads the environment and takes values as
arguments.

The state folder (NM_HOME) reaches the library as a ``narrative_mirror.home.Home`` passed down from
the entry point (``Memory``, the Dagster resources, the API). Two values the library consults deep
inside (the ``NM_CONFIG_DIR`` override read by every ``load_config``/``load_prompt``, and
``NM_PII_STRICT``) are handed to it once per process by ``hand_to_library``:
``narrative_mirror.settings`` keeps the readers and calls them at each load. Handing over the
readers rather than their values keeps today's meaning (the override in effect at each load, not
at start-up) without threading a folder through every library call that reads a config file.

Variables (all optional):
- ``NM_HOME``: state folder (Dagster instance, LanceDB, parquet outputs, logs).
  Default ``~/.narrative-mirror``.
- ``NM_DATA_DIR``: folder of chat files. Default: the demo chats shipped in the package.
- ``NM_ARCS_DIR``: folder of ``<chat>.arcs.json`` files. Default: ``NM_DATA_DIR`` itself if it
  holds any, else the sibling folder ``<data dir>_arcs`` (the RealTalk layout).
- ``NM_CONFIG_DIR``: folder whose ``*.toml`` / ``prompts/*.txt`` override the packaged defaults
  file by file.
- ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` / ``NM_LLM_MODEL`` / ``NM_LLM_TIMEOUT``: the LLM
  endpoint (neither OpenAI variable set: no LLM, offline).
- ``SLACK_BOT_TOKEN`` / ``NM_SLACK_CHANNEL``: where regression alerts are posted besides the log.
- ``NM_DEVICE``: where the embedder runs: ``auto`` (a CUDA GPU when there is one, the default),
  ``cpu`` or ``cuda``.
- ``NM_PII_STRICT``: ``1`` quarantines search results carrying e-mail addresses, phone numbers
  or card numbers: the API returns a marker naming the kind instead of their text and writes them
  to ``NM_HOME/quarantine`` instead of the run records (the memory-API design).
- ``TZ``: the machine's zone (else ``/etc/localtime``, else UTC), the zone chat exports with
  local times are read in when the command gives no ``--tz``.

Beyond one machine (all optional; unset = everything in ``NM_HOME`` on this machine):
- ``NM_LANCEDB_URI``: where the LanceDB index lives instead of ``NM_HOME/lancedb``, e.g.
  ``s3://bucket/prefix`` shared by workers on several machines. Object-store settings are the
  standard ``AWS_ENDPOINT_URL`` (an S3-compatible server), ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``,
  ``AWS_SECRET_ACCESS_KEY`` and ``AWS_ALLOW_HTTP`` (LanceDB reads them too).
- ``NM_DAGSTER_PG_URL``: PostgreSQL URL of the Dagster instance's run, event-log and schedule
  storage (``postgresql://user:password@host:5432/db``) instead of SQLite files in
  ``NM_HOME/dagster``; read where the instance is loaded.
- ``NM_CELERY_BROKER_URL``: a Celery broker (``redis://host:6379/0``): the asset jobs run each
  step as a task on Celery workers (``scripts/worker.sh``) instead of in the launching process;
  ``NM_CELERY_BACKEND_URL`` is the result backend (default: the broker).
"""

from __future__ import annotations

import os
from pathlib import Path

from narrative_mirror import settings

HOME_ENV = "NM_HOME"
DATA_DIR_ENV = "NM_DATA_DIR"
ARCS_DIR_ENV = "NM_ARCS_DIR"
CONFIG_DIR_ENV = "NM_CONFIG_DIR"
PII_STRICT_ENV = "NM_PII_STRICT"
LANCEDB_URI_ENV = "NM_LANCEDB_URI"
DAGSTER_PG_URL_ENV = "NM_DAGSTER_PG_URL"
CELERY_BROKER_ENV = "NM_CELERY_BROKER_URL"
CELERY_BACKEND_ENV = "NM_CELERY_BACKEND_URL"
LLM_BASE_URL_ENV = "OPENAI_BASE_URL"
LLM_API_KEY_ENV = "OPENAI_API_KEY"
LLM_MODEL_ENV = "NM_LLM_MODEL"
LLM_TIMEOUT_ENV = "NM_LLM_TIMEOUT"
SLACK_TOKEN_ENV = "SLACK_BOT_TOKEN"
SLACK_CHANNEL_ENV = "NM_SLACK_CHANNEL"
DEVICE_ENV = "NM_DEVICE"
TZ_ENV = "TZ"
# The object-store variables: LanceDB (object_store) reads these same names by itself.
S3_ENDPOINT_ENV = "AWS_ENDPOINT_URL"
S3_REGION_ENV = "AWS_REGION"
S3_ACCESS_KEY_ENV = "AWS_ACCESS_KEY_ID"
S3_SECRET_KEY_ENV = "AWS_SECRET_ACCESS_KEY"
S3_ALLOW_HTTP_ENV = "AWS_ALLOW_HTTP"

# Never let sentence-transformers or transformers reach for a model hub (the embedder also
# loads only from local folders; these cover any other Hugging Face code in the process).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def value(name: str) -> str:
    """The variable's value, "" when unset or empty."""
    return os.environ.get(name) or ""


def is_set(name: str) -> bool:
    return bool(os.environ.get(name))


CODE_VERSION_CACHE_ENV = "NM_CODE_VERSION_CACHE"


def code_version_cache() -> Path:
    """Where code versions are cached (assets/code_versions.py): NM_CODE_VERSION_CACHE, default
    ``$XDG_CACHE_HOME/narrative-mirror/code_versions`` (``~/.cache`` when XDG_CACHE_HOME is unset)."""
    folder = value(CODE_VERSION_CACHE_ENV)
    if folder:
        return Path(folder).expanduser()
    return Path(value("XDG_CACHE_HOME") or Path.home() / ".cache") / "narrative-mirror" / "code_versions"


def nm_home() -> Path:
    """NM_HOME (created if missing), default ``~/.narrative-mirror``."""
    home = Path(value(HOME_ENV) or Path.home() / ".narrative-mirror").expanduser()
    home.mkdir(parents=True, exist_ok=True)
    return home.resolve()


def data_dir() -> Path:
    """NM_DATA_DIR, default the packaged demo chats."""
    data = value(DATA_DIR_ENV)
    return Path(data).expanduser().resolve() if data else settings.DEMO_DATA_DIR


def arcs_dir(data: Path | None = None) -> Path | None:
    """NM_ARCS_DIR, default the ARC folder that goes with chat folder ``data``."""
    arcs = value(ARCS_DIR_ENV)
    if arcs:
        return Path(arcs).expanduser().resolve()
    return settings.default_arcs_dir(data or data_dir())


def config_dir() -> Path | None:
    """NM_CONFIG_DIR, the folder whose files override the packaged config and prompts."""
    folder = value(CONFIG_DIR_ENV)
    return Path(folder).expanduser().resolve() if folder else None


PRIVATE_UMASK = 0o077


def hand_to_library() -> None:
    """Tell the library where this process's config override comes from, and
    make what it writes private to the user: every CLI, ``serve`` and Dagster process comes
    through here, so new files under NM_HOME (index, parquet, recall runs, logs, events) are
    0600 and new folders 0700 whichever library creates them."""
    os.umask(PRIVATE_UMASK)
    settings.use_config(config_dir=config_dir, pii_strict=pii_strict)


def pii_strict() -> bool:
    """NM_PII_STRICT=1: quarantine search results that carry personal data."""
    return value(PII_STRICT_ENV) == "1"


def lancedb_uri() -> str:
    """NM_LANCEDB_URI, "" when the index lives under NM_HOME."""
    return value(LANCEDB_URI_ENV)


def s3_endpoint() -> str | None:
    return value(S3_ENDPOINT_ENV) or None


def s3_region() -> str | None:
    return value(S3_REGION_ENV) or None


def s3_allow_http() -> bool:
    """Plain-http object storage allowed: AWS_ALLOW_HTTP when set, else an http:// endpoint (a
    local S3-compatible server) allows it. LanceDB reads the other AWS_* variables by itself."""
    allow = value(S3_ALLOW_HTTP_ENV)
    if allow:
        return allow.strip().lower() in ("1", "true", "yes")
    return value(S3_ENDPOINT_ENV).startswith("http://")


def llm_settings():
    """The LLM endpoint of ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` / ``NM_LLM_MODEL`` /
    ``NM_LLM_TIMEOUT``; None when neither OpenAI variable is set (no LLM)."""
    from narrative_mirror.llm import DEFAULT_MODEL, LOCAL_API_KEY, LLMSettings

    base_url = value(LLM_BASE_URL_ENV) or None
    api_key = value(LLM_API_KEY_ENV) or None
    if base_url is None and api_key is None:
        return None
    timeout_text = value(LLM_TIMEOUT_ENV) or "30"
    try:
        timeout_s = float(timeout_text)
    except ValueError:
        raise ValueError(f"NM_LLM_TIMEOUT={timeout_text!r} is not a number of seconds") from None
    if not timeout_s > 0:
        raise ValueError(f"NM_LLM_TIMEOUT={timeout_text!r} must be a positive number of seconds")
    return LLMSettings(
        base_url=base_url,
        api_key=api_key or LOCAL_API_KEY,
        model=value(LLM_MODEL_ENV) or DEFAULT_MODEL,
        timeout_s=timeout_s,
    )


def device() -> str:
    """NM_DEVICE (auto, cpu, cuda), default auto; anything else is an error naming it."""
    chosen = (value(DEVICE_ENV) or "auto").strip().lower()
    if chosen not in ("auto", "cpu", "cuda"):
        raise ValueError(f"NM_DEVICE={value(DEVICE_ENV)!r}: expected auto, cpu or cuda")
    return chosen


def machine_zone() -> str:
    """The machine's time zone name: TZ, else the zone /etc/localtime links to, else UTC."""
    from zoneinfo import ZoneInfo

    candidates = [value(TZ_ENV).lstrip(":")]
    localtime = Path("/etc/localtime")
    if localtime.is_symlink():
        target = str(localtime.resolve())
        candidates.append(target.split("zoneinfo/", 1)[1] if "zoneinfo/" in target else "")
    timezone_file = Path("/etc/timezone")
    if timezone_file.is_file():
        candidates.append(timezone_file.read_text(encoding="utf-8", errors="replace").strip())
    for name in candidates:
        if not name:
            continue
        try:
            return ZoneInfo(name).key
        except (ValueError, KeyError, OSError):
            continue
    return "UTC"


def slack_channel() -> str:
    return value(SLACK_CHANNEL_ENV) or "#narrative-mirror"


def dagster_pg_url_env() -> str | None:
    """The name of the variable holding the instance's PostgreSQL URL when it is set, else None."""
    return DAGSTER_PG_URL_ENV if is_set(DAGSTER_PG_URL_ENV) else None


def celery_envs() -> tuple[str, str] | None:
    """The (broker, result backend) variable names when a Celery broker is configured, else None;
    the backend defaults to the broker."""
    if not is_set(CELERY_BROKER_ENV):
        return None
    return CELERY_BROKER_ENV, CELERY_BACKEND_ENV if is_set(CELERY_BACKEND_ENV) else CELERY_BROKER_ENV


def child_env(**overrides: str) -> dict[str, str]:
    """This process's environment with ``overrides``, for a child process (a CLI, a server)."""
    return {**os.environ, **overrides}


def set_for_process(name: str, folder: str | Path) -> None:
    """Point variable ``name`` at ``folder`` for the rest of this process and its children (a
    benchmark working in a throw-away NM_HOME)."""
    os.environ[name] = str(folder)
