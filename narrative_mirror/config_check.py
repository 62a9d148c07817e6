"""How the config files are checked, one way for all of them (agent.toml, retrieval.toml,
layers.toml): the settings a module reads are declared with their types, and a missing, unknown or
mistyped one is a ValueError in one format naming the file and the setting:
``<file>: <section>.<key>: <problem>``. Read per call by the modules that use them (settings.py
reads the file in effect), so an override applies to the next call."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TYPE_WORDS = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


def config_error(file: str, key: str, problem: str) -> ValueError:
    """The one error of a config setting: ``<file>: <key>: <problem>``."""
    return ValueError(f"{file}: {key}: {problem}")


def typed(file: str, key: str, value: Any, kind: type) -> Any:
    """``value`` as a ``kind`` setting (a number may be written as an integer, which becomes a
    float; true/false is never a number); else the error naming ``key``."""
    if kind is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, kind)
    if not ok:
        raise config_error(file, key, f"expected {TYPE_WORDS.get(kind, kind.__name__)}, got {value!r}")
    return value


def section(file: str, name: str, values: Any, wanted: Mapping[str, type], *, closed: bool = False) -> dict:
    """Section ``name`` of ``file`` with every key of ``wanted`` present and typed (returned typed);
    ``closed``: a key it does not declare is an error too (a misspelt setting never passes)."""
    if not isinstance(values, Mapping):
        raise config_error(file, name, "missing section" if values is None else f"expected a table, got {values!r}")
    for key in wanted:
        if key not in values:
            raise config_error(file, f"{name}.{key}", "missing")
    if closed and (unknown := sorted(set(values) - set(wanted))):
        raise config_error(file, f"{name}.{unknown[0]}", f"unknown setting (known: {', '.join(wanted)})")
    return {key: typed(file, f"{name}.{key}", values[key], kind) for key, kind in wanted.items()}


def setting_at(file: str, config: Mapping, dotted: str) -> Any:
    """The setting at ``dotted`` ("hybrid.window"); the error naming it when it is missing."""
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise config_error(file, dotted, "missing")
        node = node[part]
    return node
