"""Dagster ``code_version`` strings derived from the source an asset actually runs.

A version covers three kinds of parts, each hashed as a normalized ``ast.dump`` (no comments,
formatting or docstrings), so it changes exactly when code changes:

* the asset function itself, without its decorator (Dagster configuration is not code it runs);
* the Dagster-layer definitions it reads (``assets``/``resources``), per top-level definition and
  recursively, so editing one asset's helper leaves the other assets of that module alone;
* every ``narrative_mirror`` module it reaches, per module, closed over all imports in them.

Nothing is imported: module names are resolved to files under the project root and parsed, and
anything outside the project (dagster, polars, stdlib) is ignored. Stdlib only (and resources.environment for the cache folder), no Dagster.
The version is sha256 over the sorted (qualified name, sha256 of the part's dump) pairs, which
``code_version_parts`` lists, so one can see why a version changed.

Parsing and dumping the reached modules costs seconds in every process that loads the definitions,
so the parts are cached on disk (``NM_CODE_VERSION_CACHE``, default ``~/.cache/narrative-mirror/
code_versions``: resources/environment.py), keyed by the content of every file a version can reach: a cached
version is the one computed from the same sources.

    def versioned_asset(**kwargs):
        return lambda fn: dg.asset(code_version=code_version_of(fn), **kwargs)(fn)
"""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = frozenset({"narrative_mirror"})  # versioned per module
DAGSTER_LAYER = frozenset({"assets", "resources"})  # versioned per top-level definition

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_COMPOUND = (ast.If, ast.Try, ast.TryStar, ast.With)  # top-level blocks whose bindings are module-level


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _top_level(body: list[ast.stmt]):
    """Module-level statements, looking into ``if``/``try``/``with`` blocks (TYPE_CHECKING, fallbacks)."""
    for stmt in body:
        if isinstance(stmt, _COMPOUND):
            for block in ("body", "orelse", "finalbody"):
                yield from _top_level(getattr(stmt, block, []))
            for handler in getattr(stmt, "handlers", []):
                yield from _top_level(handler.body)
        else:
            yield stmt


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module of ``from ... import`` (relative imports count from the package)."""
    if not node.level:
        return node.module or ""
    parts = module.split(".")[: len(module.split(".")) - (node.level - (1 if is_package else 0))]
    return ".".join(parts + ([node.module] if node.module else []))


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool):
    """(bound name, module, attribute or None) for each alias of an import statement."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.asname or alias.name.split(".")[0], alias.name, None
    else:
        base = _absolute(node, module, is_package)
        for alias in node.names:
            if alias.name == "*":
                yield None, base, None
            else:
                yield alias.asname or alias.name, base, alias.name


def _normalize(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Drops bare string statements (docstrings: no-ops at run time) and returns every import.
    Statements only nest in statement lists, so expressions need not be walked (fast)."""
    imports: list[ast.Import | ast.ImportFrom] = []
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        for block in ("body", "orelse", "finalbody", "handlers", "cases"):
            stmts = getattr(node, block, None)
            if not isinstance(stmts, list):
                continue
            kept = [
                s
                for s in stmts
                if not (
                    isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)
                )
            ]
            setattr(node, block, kept)
            todo.extend(kept)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(node)
    return imports


def _bound_in(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    """Names local to a function: Python makes a name bound anywhere in it local throughout."""
    a = fn.args
    names = {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if p}
    declared_global: set[str] = set()
    todo = list(fn.body) if isinstance(fn.body, list) else [fn.body]
    while todo:
        node = todo.pop()
        if isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            names.add(node.name)
            continue  # nested scopes keep their own locals
        if isinstance(node, (ast.Lambda, *_COMPREHENSIONS)):
            continue
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.Global):
            declared_global.update(node.names)
        todo.extend(ast.iter_child_nodes(node))
    return names - declared_global


def _global_reads(node: ast.AST, local: frozenset[str] = frozenset(), reads: set[str] | None = None) -> set[str]:
    """Names ``node`` reads from module scope. Locals matter: asset parameters are named after
    upstream assets, which must not drag those assets' code into this version."""
    reads = set() if reads is None else reads
    if isinstance(node, (*_FUNCTIONS, ast.Lambda)):
        a = node.args
        # Decorators, defaults and annotations are evaluated in the enclosing scope.
        outer = [
            *getattr(node, "decorator_list", []),
            *a.defaults,
            *[d for d in a.kw_defaults if d],
            *[p.annotation for p in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if p and p.annotation],
            *([node.returns] if getattr(node, "returns", None) else []),
        ]
        for child in outer:
            _global_reads(child, local, reads)
        inner = local | _bound_in(node)
        for child in node.body if isinstance(node.body, list) else [node.body]:
            _global_reads(child, inner, reads)
        return reads
    if isinstance(node, _COMPREHENSIONS):
        local = local | {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
    elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in local:
        reads.add(node.id)
    for child in ast.iter_child_nodes(node):
        _global_reads(child, local, reads)
    return reads


class _Module:
    """One parsed source file: normalized tree, top-level definitions and import bindings."""

    def __init__(self, name: str, path: str, source: bytes):
        self.name, self.path, self.is_package = name, path, path.endswith("__init__.py")
        try:
            self.tree = ast.parse(source, filename=path)
        except SyntaxError as exc:
            raise ValueError(f"cannot parse {name} ({path}): {exc}") from exc
        # Every import anywhere (function bodies, TYPE_CHECKING blocks): the library closure follows all.
        self.imports = [
            (m, attr) for node in _normalize(self.tree) for _, m, attr in _targets(node, name, self.is_package)
        ]
        self.defs: dict[str, list[ast.stmt]] = {}
        self.bindings: dict[str, list[tuple[str, str | None]]] = {}  # name -> imported (module, attr)
        self.stars: list[tuple[str, str | None]] = []
        for stmt in _top_level(self.tree.body):
            if isinstance(stmt, (*_FUNCTIONS, ast.ClassDef)):
                self.defs.setdefault(stmt.name, []).append(stmt)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for target in {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}:
                    self.defs.setdefault(target, []).append(stmt)
            elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                for bound, mod, attr in _targets(stmt, name, self.is_package):
                    (self.stars if bound is None else self.bindings.setdefault(bound, [])).append((mod, attr))
        self._parts: dict[tuple[str, bool], tuple[str, set[str], list]] = {}

    @functools.cached_property
    def digest(self) -> str:
        return _sha(ast.dump(self.tree))

    def part(self, name: str, root_function: bool = False) -> tuple[str, set[str], list]:
        """(digest, module-scope names read, imports inside) of top-level definition ``name``;
        the asset function itself (``root_function``) without its decorators."""
        key = (name, root_function)
        if key not in self._parts:
            nodes = self.defs[name]
            if root_function:  # the last binding wins; copied so the cached tree keeps its decorators
                nodes = [copy.copy([n for n in nodes if isinstance(n, _FUNCTIONS)][-1])]
                nodes[0].decorator_list = []
            reads: set[str] = set()
            for node in nodes:
                _global_reads(node, frozenset(), reads)
            imports = [
                (m, attr)
                for node in nodes
                for sub in ast.walk(node)
                if isinstance(sub, (ast.Import, ast.ImportFrom))
                for _, m, attr in _targets(sub, self.name, self.is_package)
            ]
            self._parts[key] = (_sha("\n".join(ast.dump(n) for n in nodes)), reads, imports)
        return self._parts[key]


@functools.lru_cache(maxsize=1024)
def _parse(name: str, path: str, source: bytes) -> _Module:
    # Keyed by content, not mtime: mtimes are too coarse for quick successive edits (tests, editors).
    return _Module(name, path, source)


class _Project:
    """Module-name -> file resolution under one root, without importing anything. One per
    computation: files are re-read each time (cheap; parsing is cached by content)."""

    def __init__(self, root: Path | str):
        self.root = str(Path(root).resolve())
        self._files: dict[str, str | None] = {}
        self._modules: dict[str, _Module | None] = {}

    def file(self, name: str) -> str | None:
        if name not in self._files:
            base = os.path.join(self.root, *name.split("."))
            found = [p for p in (base + ".py", os.path.join(base, "__init__.py")) if os.path.isfile(p)]
            self._files[name] = found[0] if found else None
        return self._files[name]

    def module(self, name: str) -> _Module | None:
        if name not in self._modules:
            path = self.file(name) if name else None
            self._modules[name] = None if path is None else _parse(name, path, Path(path).read_bytes())
        return self._modules[name]

    def module_name(self, path: Path | str) -> str:
        try:
            parts = list(Path(path).resolve().with_suffix("").relative_to(self.root).parts)
        except ValueError:
            raise ValueError(f"{path} is not inside the project root {self.root}") from None
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    def resolve(self, module: str, attr: str | None) -> tuple[str, str | None]:
        """``from module import attr`` names a submodule when one exists (file, package or
        namespace directory); otherwise it is a name defined in ``module`` itself."""
        if attr is not None:
            sub = f"{module}.{attr}"
            if self.file(sub) or os.path.isdir(os.path.join(self.root, *sub.split("."))):
                return sub, None
        return module, attr

    def closure(self, names) -> set[str]:
        seen: set[str] = set()
        todo = list(names)
        while todo:
            name = todo.pop()
            if name in seen or name.split(".")[0] not in LIBRARY:
                continue
            mod = self.module(name)
            if mod is None:  # namespace package or a broken import: no source to version
                continue
            seen.add(name)
            # Only the imported module itself: parent __init__ files (re-exports) are not implied.
            todo.extend(self.resolve(m, attr)[0] for m, attr in mod.imports)
        return seen


def _cache_dir() -> Path | None:
    """The cache folder (None: no cache); the one door to the environment names it."""
    from resources import environment

    return environment.code_version_cache()


def _sources_fingerprint(project: _Project, source_path: Path | str) -> str:
    """sha256 over the name and content of every source a version can read (the library and the
    Dagster layer under the root, and the function's own file) and every folder there (a new
    folder can turn an imported name into a namespace package)."""
    digest = hashlib.sha256()

    def add(path: str) -> None:
        digest.update(os.path.relpath(path, project.root).encode() + b"\0")
        if os.path.isfile(path):
            digest.update(hashlib.sha256(Path(path).read_bytes()).digest())

    for top in sorted(LIBRARY | DAGSTER_LAYER):
        add(os.path.join(project.root, top + ".py"))
        for folder, subfolders, files in os.walk(os.path.join(project.root, top)):
            subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
            add(folder)
            for name in sorted(f for f in files if f.endswith(".py")):
                add(os.path.join(folder, name))
    add(str(Path(source_path).resolve()))
    return digest.hexdigest()


def _collect(source_path: Path | str, function_name: str, root: Path | str) -> dict[str, str]:
    """``_compute``'s parts, from the disk cache when the same sources were versioned before."""
    cache = _cache_dir()
    if cache is None:
        return _compute(source_path, function_name, root)
    project = _Project(root)
    key = _sha(f"{_sources_fingerprint(project, source_path)}\0{project.module_name(source_path)}\0{function_name}")
    path = cache / f"{key}.json"
    try:
        parts = json.loads(path.read_text())
        if isinstance(parts, dict) and parts and all(isinstance(v, str) for v in parts.values()):
            return parts
    except (OSError, ValueError):
        pass  # missing or unreadable: computed again and rewritten
    parts = _compute(source_path, function_name, root)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=cache, suffix=".tmp", delete=False) as tmp:
            json.dump(parts, tmp)
        os.replace(tmp.name, path)  # whole or absent for a reader in another process
    except OSError:
        pass  # a read-only cache only costs the computation
    return parts


def _compute(source_path: Path | str, function_name: str, root: Path | str) -> dict[str, str]:
    """Qualified name -> sha256 of the normalized dump of each part of the function's version."""
    project = _Project(root)
    module_name = project.module_name(source_path)
    mod = project.module(module_name)
    if mod is None or not any(isinstance(n, _FUNCTIONS) for n in mod.defs.get(function_name, [])):
        raise ValueError(f"{module_name} ({source_path}) has no top-level function {function_name!r}")
    parts: dict[str, str] = {}
    library: set[str] = set()

    def visit(mod: _Module, name: str, root_function: bool = False) -> None:
        key = f"{mod.name}.{name}"
        if key in parts:  # also the cycle guard
            return
        parts[key], reads, imports = mod.part(name, root_function)
        for m, attr in [*imports, *mod.stars]:  # imports in the body (lazy ones) run with it
            use(m, attr)
        for read in reads:
            if read in mod.defs:
                visit(mod, read)
            for m, attr in mod.bindings.get(read, ()):
                use(m, attr)

    def use(module: str, attr: str | None) -> None:
        module, attr = project.resolve(module, attr)
        top = module.split(".")[0]
        if top in LIBRARY:
            library.add(module)  # `from pkg import name` -> the package's own __init__ only
        elif top in DAGSTER_LAYER and (target := project.module(module)) is not None:
            for name in [attr] if attr is not None else [*target.defs, *target.bindings]:
                if name in target.defs:
                    visit(target, name)
                for m, a in target.bindings.get(name, ()):  # re-exported, e.g. resources/__init__.py
                    use(m, a)

    visit(mod, function_name, root_function=True)
    for name in project.closure(library):
        parts[name] = project.module(name).digest
    return parts


def code_version_parts_for(source_path: Path | str, function_name: str, root: Path | str = ROOT) -> dict[str, str]:
    """What the version of top-level function ``function_name`` in ``source_path`` covers:
    qualified name (``assets.layers.assets._vectors``, ``narrative_mirror.embedding``) -> short hash."""
    return {name: digest[:16] for name, digest in sorted(_collect(source_path, function_name, root).items())}


def code_version_for(source_path: Path | str, function_name: str, root: Path | str = ROOT) -> str:
    """16 hex chars of sha256 over the sorted (qualified name, hash of normalized dump) pairs."""
    parts = _collect(source_path, function_name, root)
    return _sha("".join(f"{name}\0{parts[name]}\n" for name in sorted(parts)))[:16]


def _source_of(fn) -> tuple[Path, str]:
    code = getattr(fn, "__code__", None)
    label = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
    if code is None:
        raise ValueError(f"{label} is not a Python function: no source to version")
    if "<" in fn.__qualname__ or "." in fn.__qualname__:
        raise ValueError(
            f"{label} is not a top-level function (lambda, nested or method): its source cannot be versioned on its own"
        )
    path = Path(code.co_filename)
    if not path.is_file():
        raise ValueError(f"source of {label} not found ({code.co_filename}); defined interactively?")
    return path, fn.__name__


def code_version_parts(fn, *, root: Path | str = ROOT) -> dict[str, str]:
    """Parts of ``code_version_of(fn)`` as qualified name -> short hash, for tests and people."""
    return code_version_parts_for(*_source_of(fn), root=root)


def code_version_of(fn, *, root: Path | str = ROOT) -> str:
    """Code version of an (undecorated) top-level asset function; see the module docstring."""
    return code_version_for(*_source_of(fn), root=root)


def library_closure(*module_names: str, root: Path | str = ROOT) -> set[str]:
    """``narrative_mirror`` modules reached from the given dotted names through any import."""
    project = _Project(root)
    for name in module_names:
        if name.split(".")[0] not in LIBRARY or project.module(name) is None:
            raise ValueError(f"{name} is not a library module with source under {project.root}")
    return project.closure(module_names)
