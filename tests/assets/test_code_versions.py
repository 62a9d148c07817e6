"""Code versions from source: the rules on throwaway projects, then the real library's import graph."""

import ast
import importlib.util
import textwrap
import time
from pathlib import Path

import pytest

from assets.code_versions import (
    ROOT,
    code_version_for,
    code_version_of,
    code_version_parts,
    code_version_parts_for,
    library_closure,
)


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))


def edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text()
    assert old in text, f"{old!r} not in {rel}"
    path.write_text(text.replace(old, new))


def version(root: Path, function: str, module: str = "assets/a.py") -> str:
    return code_version_for(root / module, function, root=root)


def parts(root: Path, function: str, module: str = "assets/a.py") -> dict[str, str]:
    return code_version_parts_for(root / module, function, root=root)


BASE = {
    "narrative_mirror/__init__.py": '"""Package docstring."""\nfrom narrative_mirror.big import EVERYTHING\n',
    "narrative_mirror/big.py": "EVERYTHING = 1\n",
    "narrative_mirror/lib.py": '''
        """Library module."""
        LIMIT = 10

        def scale(x):
            """Scales."""
            from narrative_mirror import deep  # lazy: only reached through this function body
            return x * LIMIT * deep.FACTOR
        ''',
    "narrative_mirror/deep.py": "FACTOR = 2\n",
    "narrative_mirror/unrelated.py": "OTHER = 3\n",
    "assets/__init__.py": "import dagster as dg\n",
    "assets/common.py": """
        from narrative_mirror import lib

        def _versioned(df):
            return lib.scale(df)

        def _unused_here():
            return 0
        """,
    "assets/a.py": '''
        import dagster as dg
        import polars as pl

        from assets.common import _versioned
        from narrative_mirror import unrelated
        from narrative_mirror.lib import scale

        _A = 1


        def _a(x):
            return _b(x) + _A


        def _b(x):
            return x


        def _c(x):
            return unrelated.OTHER + x


        def messages():
            return pl.DataFrame({"text": ["secret changed logic"]})


        @dg.asset(code_version="1")
        def f(context, messages):
            """Asset f."""
            return scale(_a(len(messages)))


        @dg.asset(deps=["x"])
        def g(messages: pl.DataFrame):
            total = len(messages)  # the parameter shadows the module-level asset `messages`
            return _versioned(_c(total))
        ''',
}


@pytest.fixture
def project(tmp_path):
    write(tmp_path, BASE)
    return tmp_path


def test_parts_cover_function_helpers_and_reached_library_modules(project):
    assert set(parts(project, "f")) == {
        "assets.a.f",
        "assets.a._a",
        "assets.a._b",
        "assets.a._A",
        "narrative_mirror.lib",
        "narrative_mirror.deep",
    }
    assert set(parts(project, "g")) == {
        "assets.a.g",
        "assets.a._c",
        "assets.common._versioned",
        "narrative_mirror.unrelated",
        "narrative_mirror.lib",
        "narrative_mirror.deep",
    }
    assert len(version(project, "f")) == 16
    int(version(project, "f"), 16)


def test_comments_blank_lines_docstrings_formatting_and_decorator_do_not_change_the_version(project):
    before = version(project, "f"), version(project, "g")
    edit(
        project,
        "assets/a.py",
        '    """Asset f."""\n    return scale(_a(len(messages)))',
        '    """Asset f, now documented at length."""\n\n    # scale the helper result\n'
        "    return scale(  _a(len(messages))  )  # why",
    )
    edit(project, "assets/a.py", '@dg.asset(code_version="1")', '@dg.asset(code_version="2", group_name="x")')
    edit(project, "assets/a.py", "_A = 1\n", "_A = 1  # a constant\n\n\n")
    edit(project, "narrative_mirror/lib.py", '"""Library module."""', '"""Library module, reworded."""\n# comment')
    edit(project, "narrative_mirror/lib.py", '"""Scales."""', "")
    edit(project, "narrative_mirror/deep.py", "FACTOR = 2\n", '"""Deep."""\nFACTOR = (\n    2\n)  # two\n')
    assert (version(project, "f"), version(project, "g")) == before


def test_code_changes_change_the_version(project):
    v0 = version(project, "f")
    edit(project, "assets/a.py", "return scale(_a(len(messages)))", "return scale(_a(len(messages) + 1))")
    v1 = version(project, "f")
    edit(project, "narrative_mirror/lib.py", "LIMIT = 10", "LIMIT = 11")
    v2 = version(project, "f")
    assert len({v0, v1, v2}) == 3


def test_transitive_library_change_counts_unrelated_module_does_not(project):
    f0, g0 = version(project, "f"), version(project, "g")
    # lib imports deep only inside a function body; f reaches deep through lib.
    edit(project, "narrative_mirror/deep.py", "FACTOR = 2", "FACTOR = 3")
    f1, g1 = version(project, "f"), version(project, "g")
    assert f1 != f0 and g1 != g0
    # unrelated is used by g (via _c), never by f; big is only re-exported by the package __init__.
    edit(project, "narrative_mirror/unrelated.py", "OTHER = 3", "OTHER = 4")
    edit(project, "narrative_mirror/big.py", "EVERYTHING = 1", "EVERYTHING = 2")
    assert version(project, "f") == f1
    assert version(project, "g") != g1


def test_helper_edit_changes_only_the_assets_that_use_it(project):
    f0, g0 = version(project, "f"), version(project, "g")
    edit(project, "assets/a.py", "return x\n", "return x + 1\n")  # _b, reached through _a
    f1 = version(project, "f")
    assert f1 != f0 and version(project, "g") == g0
    edit(project, "assets/a.py", "_A = 1", "_A = 2")
    assert version(project, "f") != f1 and version(project, "g") == g0
    # g's parameter `messages` shadows the module-level asset `messages`: its code is not g's.
    edit(project, "assets/a.py", "secret changed logic", "other logic")
    assert version(project, "g") == g0
    # Definition granularity in other Dagster modules too: only the imported helper counts.
    f2 = version(project, "f")
    edit(project, "assets/common.py", "return 0", "return 1")
    assert version(project, "g") == g0
    edit(project, "assets/common.py", "return lib.scale(df)", "return lib.scale(df) + 1")
    assert version(project, "g") != g0 and version(project, "f") == f2


def test_resources_and_reexported_classes_are_followed(tmp_path):
    write(
        tmp_path,
        {
            "narrative_mirror/__init__.py": "",
            "narrative_mirror/storage.py": "ROWS = 1\n",
            "narrative_mirror/other.py": "X = 1\n",
            "resources/__init__.py": "from resources.impl import StoreResource\nfrom narrative_mirror import other\n",
            "resources/impl.py": """
            class StoreResource:
                def get(self):
                    from narrative_mirror.storage import ROWS
                    return ROWS
            """,
            "assets/__init__.py": "",
            "assets/a.py": """
            from resources import StoreResource

            def f(context, store: StoreResource):
                return store.get()
            """,
        },
    )
    assert set(parts(tmp_path, "f")) == {"assets.a.f", "resources.impl.StoreResource", "narrative_mirror.storage"}
    v0 = version(tmp_path, "f")
    edit(tmp_path, "narrative_mirror/storage.py", "ROWS = 1", "ROWS = 2")
    assert version(tmp_path, "f") != v0


PACKAGES = {
    "narrative_mirror/__init__.py": "",
    "narrative_mirror/top.py": "T = 1\n",
    "narrative_mirror/pkg/__init__.py": "from narrative_mirror.pkg.heavy import H\nfrom narrative_mirror.pkg import mod\n",
    "narrative_mirror/pkg/heavy.py": "H = 1\n",
    "narrative_mirror/pkg/mod.py": "M = 1\n",
    "narrative_mirror/pkg/rel.py": """
        from typing import TYPE_CHECKING

        from . import mod
        from .heavy import H

        if TYPE_CHECKING:
            from ..top import T
        """,
    "narrative_mirror/pkg/by_name.py": "from narrative_mirror.pkg import H\n",
    "narrative_mirror/pkg/by_module.py": "from narrative_mirror.pkg import mod\n",
    "narrative_mirror/pkg/dotted.py": "import narrative_mirror.pkg.mod\n",
    "narrative_mirror/cycle_a.py": "import narrative_mirror.cycle_b\nA = 1\n",
    "narrative_mirror/cycle_b.py": "def b():\n    from narrative_mirror import cycle_a\n    return cycle_a.A\n",
    "assets/__init__.py": "",
    "assets/a.py": """
        import narrative_mirror.pkg.mod

        def f():
            return narrative_mirror.pkg.mod.M
        """,
}


def test_package_init_only_when_imported_by_name(tmp_path):
    write(tmp_path, PACKAGES)
    nm = "narrative_mirror."
    assert library_closure(nm + "pkg.dotted", root=tmp_path) == {nm + "pkg.dotted", nm + "pkg.mod"}
    assert library_closure(nm + "pkg.by_module", root=tmp_path) == {nm + "pkg.by_module", nm + "pkg.mod"}
    # `from pkg import H` (not a module) -> the package __init__, and through it what it imports.
    assert library_closure(nm + "pkg.by_name", root=tmp_path) == {
        nm + "pkg.by_name",
        nm + "pkg",
        nm + "pkg.heavy",
        nm + "pkg.mod",
    }
    assert set(parts(tmp_path, "f")) == {"assets.a.f", nm + "pkg.mod"}


def test_relative_and_type_checking_imports_resolve(tmp_path):
    write(tmp_path, PACKAGES)
    nm = "narrative_mirror."
    assert library_closure(nm + "pkg.rel", root=tmp_path) == {
        nm + "pkg.rel",
        nm + "pkg.mod",
        nm + "pkg.heavy",
        nm + "top",
    }


def test_import_cycle_terminates(tmp_path):
    write(tmp_path, PACKAGES)
    assert library_closure("narrative_mirror.cycle_a", root=tmp_path) == {
        "narrative_mirror.cycle_a",
        "narrative_mirror.cycle_b",
    }
    write(tmp_path, {"assets/c.py": "from narrative_mirror.cycle_b import b\n\ndef f():\n    return b()\n"})
    before = version(tmp_path, "f", "assets/c.py")
    edit(tmp_path, "narrative_mirror/cycle_a.py", "A = 1", "A = 2")
    assert version(tmp_path, "f", "assets/c.py") != before


def test_recursive_dagster_helpers_terminate(tmp_path):
    write(
        tmp_path,
        {
            "assets/__init__.py": "",
            "assets/a.py": "def _x(n):\n    return _y(n)\n\ndef _y(n):\n    return _x(n - 1) if n else 0\n\n"
            "def f():\n    return f() or _x(3)\n",
        },
    )
    assert set(parts(tmp_path, "f")) == {"assets.a.f", "assets.a._x", "assets.a._y"}


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_function_objects_resolve_to_their_source(tmp_path):
    write(
        tmp_path,
        {
            "assets/__init__.py": "",
            "assets/plain.py": "K = 2\n\ndef f(x):\n    return x * K\n",
            "narrative_mirror/__init__.py": "",
        },
    )
    fn = _load(tmp_path / "assets/plain.py", "cv_test_plain").f
    assert code_version_of(fn, root=tmp_path) == code_version_for(tmp_path / "assets/plain.py", "f", root=tmp_path)
    assert set(code_version_parts(fn, root=tmp_path)) == {"assets.plain.f", "assets.plain.K"}


def test_missing_source_is_an_error_not_a_constant(tmp_path):
    with pytest.raises(ValueError, match="lambda"):
        code_version_of(lambda: 1)
    namespace = {}
    exec(compile("def typed_in():\n    return 1\n", "<stdin>", "exec"), namespace)
    with pytest.raises(ValueError, match="typed_in"):
        code_version_of(namespace["typed_in"])
    with pytest.raises(ValueError, match="not a Python function"):
        code_version_of(len)
    write(tmp_path, {"assets/a.py": "X = 1\n"})
    with pytest.raises(ValueError, match="assets.a .*'nope'"):
        version(tmp_path, "nope")
    with pytest.raises(ValueError, match="not inside the project root"):
        code_version_for(tmp_path / "assets/a.py", "X", root=tmp_path / "elsewhere")
    with pytest.raises(ValueError, match="narrative_mirror.no_such_module"):
        library_closure("narrative_mirror.no_such_module")


# --- the real project -------------------------------------------------------------------------


def test_real_library_graph():
    embedding = library_closure("narrative_mirror.embedding")
    assert "narrative_mirror.embedding" in embedding
    assert not [m for m in embedding if m.startswith(("narrative_mirror.retrieval", "narrative_mirror.agent"))]
    query = library_closure("narrative_mirror.query")
    assert {"narrative_mirror.agent.graph", "narrative_mirror.retrieval.fusion"} <= query
    # The layers package __init__ re-exports every layer: importing one layer must not pull the rest.
    l1 = library_closure("narrative_mirror.layers.l1_topics")
    assert "narrative_mirror.layers" not in l1 and "narrative_mirror.layers.l2_threads" not in l1


def _decorated_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.decorator_list]


def test_every_real_asset_versions_quickly_and_only_from_project_code():
    """Whatever assets/*.py holds right now: every decorated function gets a version, built from
    the Dagster layer and the library only, all of them well within an import-time budget."""
    targets = [(p, name) for p in sorted((ROOT / "assets").glob("*.py")) for name in _decorated_functions(p)]
    assert targets
    started = time.perf_counter()
    versions = {(p, name): code_version_for(p, name) for p, name in targets}
    elapsed = time.perf_counter() - started
    for (p, name), v in versions.items():
        covered = code_version_parts_for(p, name)
        assert len(v) == 16 and f"{p.parent.name}.{p.stem}.{name}" in covered
        assert all(k.split(".")[0] in {"assets", "resources", "narrative_mirror"} for k in covered), covered
    assert elapsed < 1.0, f"{len(targets)} versions took {elapsed * 1000:.0f} ms"


def _sample_helper():
    return library_closure("narrative_mirror.embedding")


def test_a_function_in_this_repository():
    covered = code_version_parts(_sample_helper)
    assert "assets.code_versions.library_closure" in covered
    assert code_version_of(_sample_helper) == code_version_for(Path(__file__), "_sample_helper")
    assert code_version_of(_sample_helper) != code_version_for(Path(__file__), "test_a_function_in_this_repository")
