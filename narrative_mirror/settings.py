"""Where things live: packaged data, configuration and prompt files.

The library never reads the environment: ``resources/environment.py`` does, and hands this
module the readers of the config override folder and of PII_STRICT once per process
(``use_config``). Readers rather than values: an override changed while the process runs
applies to the next load, as before. A process that never hands them over (the library used
on its own) uses the packaged config and prompts. The state folder (NM_HOME) is not kept here:
entry points pass a ``narrative_mirror.home.Home`` down to what reads or writes there.
"""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Callable
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
DEMO_DATA_DIR = PACKAGE_DIR / "demo_data" / "chats"
DEMO_ARCS_DIR = PACKAGE_DIR / "demo_data" / "chats_arcs"
DEFAULT_CONFIG_DIR = PACKAGE_DIR / "config"
DEFAULT_PROMPTS_DIR = PACKAGE_DIR / "prompts"

_config_dir: Callable[[], Path | None] = lambda: None
_pii_strict: Callable[[], bool] = lambda: False


def use_config(config_dir: Callable[[], Path | None], pii_strict: Callable[[], bool] | None = None) -> None:
    """Where this process's config override folder comes from, and whether search results
    carrying personal data are quarantined (called by ``resources/environment.py``, where the
    environment is read)."""
    global _config_dir, _pii_strict
    _config_dir = config_dir
    if pii_strict is not None:
        _pii_strict = pii_strict


def pii_strict() -> bool:
    """The memory-API design's PII_STRICT: results with e-mail addresses, phone numbers or card numbers are
    quarantined (``narrative_mirror.pii``) instead of returned and recorded."""
    return _pii_strict()


def default_arcs_dir(data: Path) -> Path | None:
    """The ARC folder that goes with chat folder ``data``: the demo arcs, the folder itself if
    it holds ``*.arcs.json`` files, else its sibling ``<data>_arcs`` (the RealTalk layout)."""
    if data == DEMO_DATA_DIR:
        return DEMO_ARCS_DIR
    if any(data.glob("*.arcs.json")):
        return data
    sibling = data.parent / f"{data.name}_arcs"
    return sibling if sibling.is_dir() else None


def is_remote_uri(uri: str) -> bool:
    """Whether ``uri`` names object storage (``s3://``, ``gs://``, ``az://``...) rather than a folder."""
    return "://" in uri and not uri.startswith("file://")


def config_path(name: str) -> Path:
    """Path of config file ``<name>.toml`` (override folder first, then packaged default)."""
    override = _config_dir()
    if override and (override / f"{name}.toml").is_file():
        return override / f"{name}.toml"
    path = DEFAULT_CONFIG_DIR / f"{name}.toml"
    if not path.is_file():
        raise FileNotFoundError(f"no config file {name}.toml in {override or ''} or {DEFAULT_CONFIG_DIR}")
    return path


def load_config(name: str) -> dict:
    return read_config_file(config_path(name))


def read_config_file(path: Path) -> dict:
    """The TOML file at ``path``; a ValueError naming it when it is not valid TOML."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: invalid TOML: {exc}") from exc


def prompt_path(name: str) -> Path:
    override = _config_dir()
    if override and (override / "prompts" / f"{name}.txt").is_file():
        return override / "prompts" / f"{name}.txt"
    return DEFAULT_PROMPTS_DIR / f"{name}.txt"


def load_prompt(name: str) -> str:
    return prompt_path(name).read_text(encoding="utf-8")


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def prompt_names() -> list[str]:
    """Every prompt in effect: the packaged ones and those only the override folder has."""
    return sorted(
        {p.stem for p in DEFAULT_PROMPTS_DIR.glob("*.txt")}
        | {p.stem for p in ((_config_dir() or Path("/nonexistent")) / "prompts").glob("*.txt")}
    )
