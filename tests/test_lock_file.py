"""requirements.lock (scripts/lock.sh) pins every dependency of pyproject.toml, runtime and test, at a
version its specifier allows, and scripts/setup.sh installs with it."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]


def locked_versions() -> dict[str, Version]:
    pins = {}
    for number, line in enumerate((REPO / "requirements.lock").read_text().splitlines(), 1):
        if line and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and version, f"requirements.lock line {number}: {line!r} is not name==version"
            pins[canonicalize_name(name)] = Version(version)
    return pins


def test_every_dependency_is_locked_at_a_version_its_specifier_allows():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = locked_versions()
    for spec in project["dependencies"] + project["optional-dependencies"]["test"]:
        requirement = Requirement(spec)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is not in requirements.lock: run scripts/lock.sh"
        assert requirement.specifier.contains(pins[name], prereleases=True), (spec, str(pins[name]))


def test_setup_installs_with_the_lock_as_constraints():
    setup = (REPO / "scripts" / "setup.sh").read_text()
    installs = [
        line for line in setup.splitlines() if "-e " in line and ("pip install" in line or "install_locked" in line)
    ]
    assert installs and all("-c requirements.lock" in line for line in installs), installs
