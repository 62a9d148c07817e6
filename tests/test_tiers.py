"""The tiers (tests/README.md): a test with an opt-in mark runs only when the -m expression names it."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
# A file with e2e tests beside default ones, and one whose tests take the browser fixture.
FILES = [TESTS / "test_definitions.py", TESTS / "pages" / "test_real_chat.py"]


class Collected:
    def __init__(self):
        self.in_order: list[str] = []

    def pytest_collection_finish(self, session):
        self.in_order = [item.nodeid for item in session.items]


def collected_in_order(*args: str, files=FILES) -> list[str]:
    """The test ids a run with ``args`` would run, in the order it runs them (collected in this
    process: nothing runs)."""
    plugin = Collected()
    code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *args, *map(str, files)], plugins=[plugin])
    assert code in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED), code
    return plugin.in_order


def collected(*args: str) -> list[str]:
    return sorted(nodeid.split("::")[-1] for nodeid in collected_in_order(*args))


def test_the_default_suite_leaves_out_the_opt_in_tiers_and_each_tier_selects_its_own():
    default, e2e, browser = collected(), collected("-m", "e2e"), collected("-m", "browser")
    assert e2e == ["test_dg_check_defs_passes", "test_webserver_serves_assets_and_chat_file_partitions"]
    assert browser and all(name.startswith("test_") for name in browser)
    assert "test_definitions_load_and_validate" in default
    assert not set(default) & (set(e2e) | set(browser))
    assert sorted(default + e2e + browser) == collected("-m", "e2e or browser or not e2e")


def test_all_tiers_lets_the_expression_alone_select_and_the_dearest_modules_run_first():
    everything = collected("-m", "e2e or browser or not e2e")
    assert collected("--all-tiers") == everything
    assert collected("--all-tiers", "-m", "not browser") == sorted(collected() + collected("-m", "e2e"))
    # Given the browser file first, the file with e2e tests (dearer) still runs first, its tests together.
    order = collected_in_order("--all-tiers", files=FILES[::-1])
    files = [nodeid.split("::")[0] for nodeid in order]
    assert files == sorted(files, key=lambda f: not f.endswith("test_definitions.py")), files
    assert len(order) == len(everything)
