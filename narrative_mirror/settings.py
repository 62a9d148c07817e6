"""Where things live: state folder, data folders, configuration and prompt files.

Environment variables (all optional):
- ``NM_HOME``: state folder (Dagster instance, LanceDB, parquet outputs, logs).
  Default ``~/.narrative-mirror``.
- ``NM_DATA_DIR``: folder of chat files. Default: the demo chats shipped in this package.
- ``NM_ARCS_DIR``: folder of ``<chat>.arcs.json`` files. Default: ``NM_DATA_DIR`` itself if it
  holds any, else the sibling folder ``<data dir>_arcs`` (the RealTalk layout).
- ``NM_CONFIG_DIR``: folder whose ``*.toml`` / ``prompts/*.txt`` override the packaged defaults
  file by file.

Beyond one machine (all optional; unset = everything in ``NM_HOME`` on this machine):
- ``NM_LANCEDB_URI``: where the LanceDB index lives instead of ``NM_HOME/lancedb``, e.g.
  ``s3://bucket/prefix`` shared by workers on several machines. Object-store settings are the
  standard ``AWS_ENDPOINT_URL`` (an S3-compatible server), ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``,
  ``AWS_SECRET_ACCESS_KEY`` and ``AWS_ALLOW_HTTP`` (LanceDB reads them too).
- ``NM_DAGSTER_PG_URL``: PostgreSQL URL of the Dagster instance's run, event-log and schedule
  storage (``postgresql://user:password@host:5432/db``) instead of SQLite files in
  ``NM_HOME/dagster``; read where the instance is loaded (jobs/instance_storage.py).
- ``NM_CELERY_BROKER_URL``: a Celery broker (``redis://host:6379/0``): the asset jobs run each
  step as a task on Celery workers (``scripts/worker.sh``) instead of in the launching process;
  ``NM_CELERY_BACKEND_URL`` is the result backend (default: the broker).
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
DEMO_DATA_DIR = PACKAGE_DIR / "demo_data" / "chats"
DEMO_ARCS_DIR = PACKAGE_DIR / "demo_data" / "chats_arcs"
DEFAULT_CONFIG_DIR = PACKAGE_DIR / "config"
DEFAULT_PROMPTS_DIR = PACKAGE_DIR / "prompts"


def nm_home() -> Path:
    home = Path(os.environ.get("NM_HOME") or Path.home() / ".narrative-mirror").expanduser()
    home.mkdir(parents=True, exist_ok=True)
    return home.resolve()


def data_dir() -> Path:
    value = os.environ.get("NM_DATA_DIR")
    return Path(value).expanduser().resolve() if value else DEMO_DATA_DIR


def arcs_dir(data: Path | None = None) -> Path | None:
    value = os.environ.get("NM_ARCS_DIR")
    if value:
        return Path(value).expanduser().resolve()
    return default_arcs_dir(data or data_dir())


def default_arcs_dir(data: Path) -> Path | None:
    """The ARC folder that goes with chat folder ``data``: the demo arcs, the folder itself if
    it holds ``*.arcs.json`` files, else its sibling ``<data>_arcs`` (the RealTalk layout)."""
    if data == DEMO_DATA_DIR:
        return DEMO_ARCS_DIR
    if any(data.glob("*.arcs.json")):
        return data
    sibling = data.parent / f"{data.name}_arcs"
    return sibling if sibling.is_dir() else None


LANCEDB_URI_ENV = "NM_LANCEDB_URI"
DAGSTER_PG_URL_ENV = "NM_DAGSTER_PG_URL"
CELERY_BROKER_ENV = "NM_CELERY_BROKER_URL"
CELERY_BACKEND_ENV = "NM_CELERY_BACKEND_URL"
# The object-store variables: LanceDB (object_store) reads these same names by itself.
S3_ENDPOINT_ENV = "AWS_ENDPOINT_URL"
S3_REGION_ENV = "AWS_REGION"
S3_ACCESS_KEY_ENV = "AWS_ACCESS_KEY_ID"
S3_SECRET_KEY_ENV = "AWS_SECRET_ACCESS_KEY"
S3_ALLOW_HTTP_ENV = "AWS_ALLOW_HTTP"


def lancedb_uri() -> str:
    return os.environ.get(LANCEDB_URI_ENV) or str(nm_home() / "lancedb")


def s3_allow_http() -> bool:
    """Plain-http object storage allowed: AWS_ALLOW_HTTP when set, else an http:// endpoint (a
    local S3-compatible server) allows it. LanceDB reads the other AWS_* variables by itself."""
    value = os.environ.get(S3_ALLOW_HTTP_ENV)
    if value:
        return value.strip().lower() in ("1", "true", "yes")
    return (os.environ.get(S3_ENDPOINT_ENV) or "").startswith("http://")


def is_remote_uri(uri: str) -> bool:
    """Whether ``uri`` names object storage (``s3://``, ``gs://``, ``az://``...) rather than a folder."""
    return "://" in uri and not uri.startswith("file://")


def _override_dir() -> Path | None:
    value = os.environ.get("NM_CONFIG_DIR")
    return Path(value).expanduser().resolve() if value else None


def config_path(name: str) -> Path:
    """Path of config file ``<name>.toml`` (override folder first, then packaged default)."""
    override = _override_dir()
    if override and (override / f"{name}.toml").is_file():
        return override / f"{name}.toml"
    path = DEFAULT_CONFIG_DIR / f"{name}.toml"
    if not path.is_file():
        raise FileNotFoundError(f"no config file {name}.toml in {override or ''} or {DEFAULT_CONFIG_DIR}")
    return path


def load_config(name: str) -> dict:
    path = config_path(name)
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: invalid TOML: {exc}") from exc


def prompt_path(name: str) -> Path:
    override = _override_dir()
    if override and (override / "prompts" / f"{name}.txt").is_file():
        return override / "prompts" / f"{name}.txt"
    return DEFAULT_PROMPTS_DIR / f"{name}.txt"


def load_prompt(name: str) -> str:
    return prompt_path(name).read_text(encoding="utf-8")


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def prompts_hash() -> str:
    """One hash over every prompt in effect (name + content), for lineage."""
    h = hashlib.sha256()
    names = sorted({p.stem for p in DEFAULT_PROMPTS_DIR.glob("*.txt")}
                   | {p.stem for p in ((_override_dir() or Path("/nonexistent")) / "prompts").glob("*.txt")})
    for name in names:
        h.update(name.encode())
        h.update(prompt_path(name).read_bytes())
    return h.hexdigest()
