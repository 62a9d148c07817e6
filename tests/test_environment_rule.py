"""One door to the environment: only ``resources/`` reads (or writes) environment variables.

Every other Python file of the repository (library, assets, jobs, definitions, command line,
API, benchmarks, scripts) takes its values from ``resources/environment.py`` or from a resource.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ALLOWED = {"tests", "resources"}  # top-level folders that may touch the environment
SKIPPED = {".git", ".venv", "venv", "build", "dist", "node_modules", "__pycache__"}
OS_ENV_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def _python_files() -> list[Path]:
    files = []
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).parts
        if parts[0] in ALLOWED or any(p in SKIPPED or p.startswith(".") for p in parts[:-1]):
            continue
        files.append(path)
    return files


def environment_accesses(source: str) -> list[tuple[int, str]]:
    """(line, what) of every environment access in ``source``: ``os.environ``/``os.getenv``/
    ``os.putenv``/..., those names imported from ``os``, ``environ.get`` and ``EnvVar``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            if node.attr in OS_ENV_NAMES and isinstance(node.value, ast.Name) and node.value.id == "os":
                found.append((node.lineno, f"os.{node.attr}"))
            elif (
                node.attr in ("get", "setdefault", "pop", "update")
                and isinstance(node.value, ast.Name)
                and node.value.id in ("environ", "environb")
            ):
                found.append((node.lineno, f"{node.value.id}.{node.attr}"))
            elif node.attr == "EnvVar":
                found.append((node.lineno, "EnvVar (declare it in a resource)"))
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            for alias in node.names:
                if alias.name in OS_ENV_NAMES:
                    found.append((node.lineno, f"from os import {alias.name}"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "dagster":
            if any(alias.name == "EnvVar" for alias in node.names):
                found.append((node.lineno, "from dagster import EnvVar (declare it in a resource)"))
    return sorted(found)


def test_the_rule_sees_every_kind_of_access():
    source = (
        "import os\nfrom os import environ, getenv\nimport dagster as dg\n"
        "a = os.environ.get('X')\nb = os.getenv('X')\nos.putenv('X', '1')\nc = environ.get('X')\n"
        "d = dg.EnvVar('X')\ne = os.path.join('a', 'b')\n"
    )
    assert [line for line, _ in environment_accesses(source)] == [2, 2, 4, 5, 6, 7, 8]


def test_files_are_found():
    files = {p.relative_to(ROOT).as_posix() for p in _python_files()}
    assert "cli/main.py" in files and "narrative_mirror/settings.py" in files
    assert not any(f.startswith(("resources/", "tests/")) for f in files)
    assert any(f.startswith("benchmarks/") for f in files)


def test_no_environment_access_outside_resources():
    accesses = [
        f"{path.relative_to(ROOT).as_posix()}:{line}: {what}"
        for path in _python_files()
        for line, what in environment_accesses(path.read_text(encoding="utf-8"))
    ]
    assert not accesses, "read the environment in resources/ (resources/environment.py), not here:\n" + "\n".join(
        accesses
    )
