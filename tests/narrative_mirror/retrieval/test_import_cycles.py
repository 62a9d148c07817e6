"""The retrieval and agent packages import each other's modules without cycles (every import
counted, TYPE_CHECKING ones too): records live apart from the engine that fills them."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("narrative_mirror/retrieval", "narrative_mirror/agent")


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _imports(path: Path, known: set[str]) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found & known


def test_no_import_cycle_in_retrieval_and_agent():
    files = {_module(p): p for package in PACKAGES for p in (ROOT / package).glob("*.py")}
    known = set(files)
    graph = {name: _imports(path, known) - {name} for name, path in files.items()}
    cycles = []

    def visit(name: str, stack: list[str], done: set[str]) -> None:
        if name in stack:
            cycles.append(stack[stack.index(name):] + [name])
            return
        if name in done:
            return
        for target in sorted(graph[name]):
            visit(target, stack + [name], done)
        done.add(name)

    done: set[str] = set()
    for name in sorted(graph):
        visit(name, [], done)
    assert not cycles, cycles
