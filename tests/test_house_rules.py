"""The house rules of issue #24 that a test can hold: library files stay small and no module
of the project imports itself back through others (a cycle means two modules share one job)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("narrative_mirror", "assets", "jobs", "instance", "resources", "definitions", "cli", "api")
LIBRARY_LIMIT = 530  # lines of ruff-formatted code ("no library file over ~450 lines" was set before the formatter)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imported(path: Path, module: str, known: dict[str, Path]) -> set[str]:
    """Project modules ``module`` imports anywhere in its file (type-checking and function-level
    imports included: a cycle hidden in a function is still a cycle)."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for name in names:
            # the longest known prefix: "pkg.mod.Name" -> "pkg.mod"
            parts = name.split(".")
            for end in range(len(parts), 0, -1):
                candidate = ".".join(parts[:end])
                if candidate in known:
                    if candidate != module and not module.startswith(candidate + "."):
                        out.add(candidate)
                    break
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_between_project_modules():
    known = _modules()
    graph = {module: _imported(path, module, known) for module, path in known.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_library_files_stay_small():
    big = {
        str(path.relative_to(REPO)): n
        for package in ("narrative_mirror", "api")
        for path in (REPO / package).rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > LIBRARY_LIMIT
    }
    assert big == {}
