"""NM_HOME's layout is named once, in narrative_mirror/home.py: no other project file spells a
sub-path of the home (``home / "lancedb"``, ``state.root / "recall_runs"``, ...)."""

from __future__ import annotations

import re
from pathlib import Path

from narrative_mirror.home import Home

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ("narrative_mirror", "cli", "api", "assets", "resources", "jobs", "definitions", "scripts")


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
    """Lines that join a home (a name or attribute ending in home/root/nm_home()/state_home())
    with one of the layout's names, or bind one of them to a constant."""
    alternatives = "|".join(sorted(map(re.escape, names)))
    joined = re.compile(rf"(?:home|root|nm_home\(\)|state_home\(\))\s*/\s*[\"'](?:{alternatives})[\"']")
    constant = re.compile(rf"^[A-Z_]+(?:DIR|FOLDER|FILE)\s*=\s*[\"'](?:{alternatives})[\"']")
    return [line.strip() for line in source.splitlines() if joined.search(line) or constant.search(line.strip())]


def test_the_check_sees_a_spelled_sub_path():
    names = layout_names()
    assert {"lancedb", "storage", "live", "recall_runs", "events", "adaptation"} <= names
    source = (
        "uri = str(environment.nm_home() / \"lancedb\")\nlog = LiveLog(home / 'live')\n"
        'runs = state.root / "recall_runs"\nQUARANTINE_DIR = "quarantine"\nok = Home(home).live\n'
        'tool = Path(sys.executable).parent / "dagster"\n'
    )
    assert len(spelled(source, names)) == 4


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
