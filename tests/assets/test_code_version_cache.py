"""The disk cache of code versions: the same versions as computing them, computed again on any edit."""

import ast
import os

import pytest

import assets.code_versions as code_versions
from assets.code_versions import ROOT, code_version_for, code_version_parts_for


def _real_assets() -> list[tuple]:
    found = []
    for path in sorted((ROOT / "assets").rglob("*.py")):
        tree = ast.parse(path.read_text())
        found += [(path, n.name) for n in tree.body if isinstance(n, ast.FunctionDef) and n.decorator_list]
    return found


def _no_parsing(monkeypatch):
    def refuse(*args):
        raise AssertionError("parsed although the cache holds these sources")

    monkeypatch.setattr(code_versions, "_compute", refuse)


def test_cached_versions_of_every_real_asset_equal_the_computed_ones_and_parse_nothing(tmp_path, monkeypatch):
    targets = _real_assets()
    assert len(targets) >= 15
    with monkeypatch.context() as uncached:
        uncached.setattr(code_versions, "_cache_dir", lambda: None)
        computed = {t: code_version_for(*t) for t in targets}
        computed_parts = {t: code_version_parts_for(*t) for t in targets}
    monkeypatch.setenv("NM_CODE_VERSION_CACHE", str(tmp_path / "cache"))
    assert {t: code_version_for(*t) for t in targets} == computed  # cold: computed and stored
    _no_parsing(monkeypatch)
    assert {t: code_version_for(*t) for t in targets} == computed  # warm: read back
    assert {t: code_version_parts_for(*t) for t in targets} == computed_parts


def _project(root):
    (root / "assets").mkdir(parents=True)
    (root / "narrative_mirror").mkdir()
    (root / "narrative_mirror" / "__init__.py").write_text("")
    (root / "narrative_mirror" / "lib.py").write_text("def scale(x):\n    return x * 2\n")
    (root / "assets" / "a.py").write_text("from narrative_mirror.lib import scale\n\ndef f():\n    return scale(1)\n")


def test_an_edit_of_the_same_size_and_time_is_versioned_again_and_a_broken_cache_file_is_recomputed(
    tmp_path, monkeypatch
):
    cache = tmp_path / "cache"
    monkeypatch.setenv("NM_CODE_VERSION_CACHE", str(cache))
    root = tmp_path / "project"
    _project(root)
    before = code_version_for(root / "assets/a.py", "f", root=root)
    lib = root / "narrative_mirror" / "lib.py"
    stat = lib.stat()
    lib.write_text(lib.read_text().replace("x * 2", "x * 3"))  # same size
    os.utime(lib, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same time
    edited = code_version_for(root / "assets/a.py", "f", root=root)
    with monkeypatch.context() as uncached:
        uncached.setattr(code_versions, "_cache_dir", lambda: None)
        assert edited == code_version_for(root / "assets/a.py", "f", root=root) != before

    for stored in cache.glob("*.json"):
        stored.write_text('{"truncated')
    assert code_version_for(root / "assets/a.py", "f", root=root) == edited


def test_a_new_library_file_is_a_new_version_and_errors_are_not_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("NM_CODE_VERSION_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "project"
    _project(root)
    (root / "assets" / "b.py").write_text("from narrative_mirror import helpers\n\ndef g():\n    return helpers\n")
    before = code_version_parts_for(root / "assets/b.py", "g", root=root)
    assert "narrative_mirror.helpers" not in before
    (root / "narrative_mirror" / "helpers.py").write_text("VALUE = 1\n")
    assert "narrative_mirror.helpers" in code_version_parts_for(root / "assets/b.py", "g", root=root)
    for _ in range(2):
        with pytest.raises(ValueError, match="no top-level function 'missing'"):
            code_version_for(root / "assets/b.py", "missing", root=root)
