"""NM_HOME's layout is named once, in narrative_mirror/home.py: no other project file spells a
sub-path of the home (``home / "lancedb"``, ``state.root / "recall_runs"``, ...), and the home is
passed down from the entry point, never kept process-wide."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from narrative_mirror.home import Home

ROOT = Path(__file__).resolve().parent.parent
PROJECT = (
    "narrative_mirror",
    "cli",
    "api",
    "assets",
    "resources",
    "jobs",
    "instance",
    "definitions",
    "scripts",
    "benchmarks",
)


def layout_names() -> set[str]:
    """Every first part of a path ``Home`` names under its root (lancedb, storage, events, ...)."""
    home = Home(Path("/h"))
    names = {
        getattr(home, name).relative_to(home.root).parts[0]
        for name, value in vars(Home).items()
        if isinstance(value, property)
    }
    return names | {getattr(home, name).name for name, value in vars(Home).items() if isinstance(value, property)}


def spelled(source: str, names: set[str]) -> list[str]:
    """Lines that join a home (a name or attribute ending in home/root/nm_home(), or ``Path(home)``)
    with one of the layout's names, or bind one of them to a constant."""
    alternatives = "|".join(sorted(map(re.escape, names)))
    joined = re.compile(rf"(?:home|root|nm_home\(\))\)?\s*/\s*[\"'](?:{alternatives})[\"']")
    constant = re.compile(rf"^[A-Z_]+(?:DIR|FOLDER|FILE|NAME)\s*=\s*[\"'](?:{alternatives})[\"']")
    return [line.strip() for line in source.splitlines() if joined.search(line) or constant.search(line.strip())]


def test_the_check_sees_a_spelled_sub_path():
    names = layout_names()
    assert {"lancedb", "storage", "live", "recall_runs", "events", "adaptation"} <= names
    source = (
        "uri = str(environment.nm_home() / \"lancedb\")\nlog = LiveLog(home / 'live')\n"
        'runs = state.root / "recall_runs"\nQUARANTINE_DIR = "quarantine"\nok = Home(home).live\n'
        'tool = Path(sys.executable).parent / "dagster"\nfolder = Path(home) / "broken"\nSOCKET_NAME = "serve.sock"\n'
    )
    assert len(spelled(source, names)) == 6


def test_no_home_sub_path_is_spelled_outside_home_py():
    names = layout_names()
    found = [
        f"{path.relative_to(ROOT)}: {line}"
        for folder in PROJECT
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path != ROOT / "narrative_mirror" / "home.py"
        for line in spelled(path.read_text(encoding="utf-8"), names)
    ]
    assert not found, "name it in narrative_mirror/home.py (Home) and use that:\n" + "\n".join(found)


def project_modules():
    for folder in PROJECT:
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_no_module_keeps_a_process_wide_home():
    """The home reaches the library as a ``Home`` argument: no ``state_home()`` reader, no
    ``use_folders`` callback, no module-level variable holding a home."""
    found = []
    for path, tree in project_modules():
        for node in ast.walk(tree):
            name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
            if name in ("state_home", "use_folders"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
        for node in tree.body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno}: module-level {t.id}"
                for t in targets
                if isinstance(t, ast.Name) and t.id.lower().lstrip("_") in ("home", "state_home", "nm_home")
            ]
    assert not found, "pass the Home down from the entry point instead:\n" + "\n".join(found)
