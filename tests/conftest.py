"""Shared fixtures. Test helpers in this folder (e.g. llm_servers.py) import by module name."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from resources import environment  # noqa: E402

# The library's folders come from the environment, as in every process that builds resources.
environment.hand_to_library()

REALTALK_DIR = TESTS_DIR.parent.parent / "shared" / "datasets" / "realtalk"
if not REALTALK_DIR.is_dir():
    REALTALK_DIR = Path("/work/shared/datasets/realtalk")
REALTALK_ARCS_DIR = REALTALK_DIR.parent / "realtalk_arcs"


def pytest_configure(config):
    """One code-version cache (assets/code_versions.py) for the run: the workers and every process a
    test starts inherit it, so the definitions' sources are parsed once per run, not per process.
    Keyed by the sources' content, so sharing it cannot mix versions; outside the user's cache."""
    if not hasattr(config, "workerinput") and "NM_CODE_VERSION_CACHE" not in os.environ:
        config._nm_code_version_cache = tempfile.mkdtemp(prefix="nm-code-versions-")
        os.environ["NM_CODE_VERSION_CACHE"] = config._nm_code_version_cache


def pytest_unconfigure(config):
    cache = getattr(config, "_nm_code_version_cache", None)
    if cache:
        shutil.rmtree(cache, ignore_errors=True)
        os.environ.pop("NM_CODE_VERSION_CACHE", None)


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):
    """Every test gets its own NM_HOME and no LLM unless it configures one."""
    monkeypatch.setenv("NM_HOME", str(tmp_path / "nm_home"))
    for var in (
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "NM_LLM_MODEL",
        "NM_LLM_TIMEOUT",
        "NM_DATA_DIR",
        "NM_ARCS_DIR",
        "NM_CONFIG_DIR",
        "NM_EVAL_PROFILE",
        "SLACK_BOT_TOKEN",
        "NM_PII_STRICT",
    ):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="session")
def realtalk_dir() -> Path:
    if not REALTALK_DIR.is_dir():
        pytest.skip(f"RealTalk data not found at {REALTALK_DIR}")
    return REALTALK_DIR


@pytest.fixture(scope="session")
def embedder():
    from narrative_mirror.embedding import Embedder

    return Embedder()


@pytest.fixture(scope="session")
def retriever(embedder, tmp_path_factory):
    """The tiny chat of memory_api_chat.py in a real LanceDB, built once per run, for tests that only
    read it. A module that needs another index defines its own ``retriever`` (it takes precedence)."""
    from memory_api_chat import build_retriever

    return build_retriever(tmp_path_factory.mktemp("tiny_chat") / "lancedb", embedder)


# -- beyond one machine ---------------------------------------------------------------------
# Settings that move state off this machine (PostgreSQL instance, Celery executor, object
# storage): unset in every test unless it sets them itself (tests/services/).
DISTRIBUTED_ENV = (
    "NM_DAGSTER_PG_URL",
    "NM_CELERY_BROKER_URL",
    "NM_CELERY_BACKEND_URL",
    "NM_LANCEDB_URI",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ALLOW_HTTP",
)


@pytest.fixture(autouse=True)
def _no_distributed_env(monkeypatch):
    for var in DISTRIBUTED_ENV:
        monkeypatch.delenv(var, raising=False)


# The tiers (tests/README.md says which a new test belongs to). A test with one of these marks runs
# only when the -m expression names the mark; the default suite is every other test.
OPT_IN_MARKS = ("slow", "e2e", "browser", "llm_server", "services")
# A test that uses one of these fixtures gets the fixture's mark without writing it.
MARK_OF_FIXTURE = {"browser": "browser"}


def pytest_itemcollected(item):
    # Here, not in pytest_collection_modifyitems: pytest's own -m filter may run before that hook.
    for fixture, mark in MARK_OF_FIXTURE.items():
        if fixture in getattr(item, "fixturenames", ()):
            item.add_marker(mark)


def pytest_addoption(parser):
    parser.addoption(
        "--all-tiers",
        action="store_true",
        help="leave no opt-in tier out: an -m expression alone selects (.ci/run: every tier, services included)",
    )


# The tiers by what one of their tests costs, dearest first: a run starts these first, so that no
# worker is left alone with a long test at the end of the run. A `services` test mostly waits on its
# servers and Celery workers: started early, its waits overlap the local tiers' work.
COST_RANK = {"slow": 0, "e2e": 1, "llm_server": 1, "services": 1, "browser": 2}


def cost_rank(item) -> int:
    return min((rank for mark, rank in COST_RANK.items() if item.get_closest_marker(mark)), default=len(COST_RANK))


def dearest_modules_first(items: list) -> list:
    """The items of each module together, in their order (a module-scoped fixture is built once),
    the modules ordered by their dearest test's tier (stable: the collection order within a tier)."""
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    ordered = sorted(modules.values(), key=lambda tests: min(map(cost_rank, tests)))
    return [item for tests in ordered for item in tests]


def pytest_collection_modifyitems(config, items):
    """Leave out tests with an opt-in mark the -m expression does not name (unless --all-tiers), so
    the default suite stays short and never runs a `services` test by accident without its servers;
    then order the rest dearest first."""
    expression = config.getoption("markexpr", "") or ""
    all_tiers = config.getoption("--all-tiers", False)
    left_out = [] if all_tiers else [mark for mark in OPT_IN_MARKS if mark not in expression]
    kept, dropped = [], []
    for item in items:
        (dropped if any(item.get_closest_marker(mark) for mark in left_out) else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = dearest_modules_first(kept)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A `services` test that skips has not tested anything: it counts as failed."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and item.get_closest_marker("services") is not None and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.longrepr = f"a `services` test must not skip (its servers must run): {reason}"
