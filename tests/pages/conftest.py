"""One built memory and two served inspectors for the browser tests, and the headless Chromium
that drives them (Debian's ``chromium`` + ``chromium-driver``, installed by ``scripts/setup.sh --test``).

The memory: the demo chat ``demo_garden_Mara_Theo`` and a small hostile chat whose text carries
``<script>``, built and evaluated once by the real command line (``eval --split train``) into a
home of its own. Served twice by uvicorn on loopback: open, and with a token file whose only token
reads ``demo_garden_*``. Screenshots of the views go to a temporary folder, or to the folder
named by ``NM_SCREENSHOTS`` (``NM_SCREENSHOTS=docs/screenshots pytest tests/pages``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from inspector_browser import (
    CHROMEDRIVER,
    CHROMIUM,
    GARDEN,
    HOSTILE,
    LAUNCH_FLAGS,
    Browser,
    LoopbackServer,
    Served,
    hostile_chat,
)


@pytest.fixture(scope="session")
def built_home(tmp_path_factory):
    """NM_HOME with the two chats built and their train evaluation stored (one `eval` run).
    ``NM_INSPECTOR_HOME`` names a folder to build it in once and reuse on later runs (for
    regenerating screenshots; delete the folder after changing what the build makes)."""
    from cli.main import main
    from narrative_mirror import settings

    kept = os.environ.get("NM_INSPECTOR_HOME")
    root = Path(kept) if kept else tmp_path_factory.mktemp("inspector")
    if kept and (root / "home" / "experiments").is_dir():
        return root / "home"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    data, arcs = root / "chats", root / "chats_arcs"
    data.mkdir()
    arcs.mkdir()
    shutil.copy(settings.DEMO_DATA_DIR / f"{GARDEN}.json", data)
    shutil.copy(settings.DEMO_ARCS_DIR / f"{GARDEN}.arcs.json", arcs)
    (data / f"{HOSTILE}.json").write_text(json.dumps(hostile_chat()), encoding="utf-8")
    home = root / "home"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NM_HOME", str(home))
        assert main(["eval", "--data", str(data), "--split", "train", "--json"]) == 0
    return home


@pytest.fixture(scope="session")
def servers(built_home, embedder, tmp_path_factory):
    """(open inspector, inspector with tokens), both serving ``built_home``."""
    from api.access import add_token, load_tokens
    from api.app import create_app
    from narrative_mirror import settings
    from narrative_mirror.events.writer import EventLog
    from narrative_mirror.index_store import IndexStore
    from narrative_mirror.retrieval.engine import Retriever

    retriever = Retriever(IndexStore(str(built_home / "lancedb")), embedder, settings.load_config("retrieval"))
    assert retriever.chat_files() == sorted([GARDEN, HOSTILE])
    token_file = tmp_path_factory.mktemp("tokens") / "tokens.json"
    token = add_token(token_file, "garden-reader", ["demo_garden_*"])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NM_HOME", str(built_home))
        open_app = create_app(retriever, EventLog(built_home / "lancedb", embedder=embedder))
        token_app = create_app(
            retriever, EventLog(built_home / "lancedb", embedder=embedder), tokens=load_tokens(token_file)
        )
    with LoopbackServer(open_app) as open_base, LoopbackServer(token_app) as token_base:
        yield Served(open_base, built_home, retriever), Served(token_base, built_home, retriever, token)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not (CHROMIUM.is_file() and CHROMEDRIVER.is_file()):
        pytest.skip("Chromium not installed: run scripts/setup.sh --test (Debian packages chromium, chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in LAUNCH_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    shots = Path(os.environ.get("NM_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(120)
    try:
        browser = Browser(driver, shots)
        browser.visit("about:blank")
        browser.take()  # the start page's own requests (chrome://new-tab-page...) are not ours
        yield browser
    finally:
        driver.quit()
