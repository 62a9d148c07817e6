"""The HTTP service stays outside the domain library: nothing in ``narrative_mirror/`` imports a
web framework or the ``api`` package (the service depends on the library, never the reverse)."""

from __future__ import annotations

import ast
from pathlib import Path

LIBRARY = Path(__file__).resolve().parents[2] / "narrative_mirror"
HTTP_PACKAGES = {"api", "fastapi", "starlette", "uvicorn"}


def imported_packages(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_library_imports_no_http_code():
    modules = sorted(LIBRARY.rglob("*.py"))
    assert len(modules) > 20  # the library was found
    offenders = {str(path.relative_to(LIBRARY)): sorted(imported_packages(path) & HTTP_PACKAGES) for path in modules}
    assert {path: names for path, names in offenders.items() if names} == {}
