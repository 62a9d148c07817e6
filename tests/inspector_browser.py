"""Helpers of the inspector's browser tests (tests/pages): the hostile chat, a uvicorn server in a
thread, and a Selenium-driven Chromium that records every URL it requests."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from loopback import free_port

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
GARDEN = "demo_garden_Mara_Theo"
HOSTILE = "demo_hostile_Eve_Mal"
SCRIPT_TEXT = "<script>window.__nmPwned = 1; alert('pwned')</script> is just text here"
IMG_TEXT = '<img src=x onerror="window.__nmPwned = 2"> neither is this'
LAUNCH_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,1000",
)


def hostile_chat() -> dict:
    lines = [
        ("Eve", "Hi Mal! I baked a plum cake for the street party on Saturday."),
        ("Mal", SCRIPT_TEXT),
        ("Eve", IMG_TEXT),
        ("Mal", "Save me a slice of that plum cake!"),
    ]
    return {
        "name": {"speaker_1": "Eve", "speaker_2": "Mal"},
        "session_1": [
            {
                "clean_text": text,
                "speaker": who,
                "date_time": f"06.05.2024, 18:{10 + 2 * i:02d}:00",
                "img_file": [],
                "img_url": [],
                "dia_id": f"D1:{i + 1}",
            }
            for i, (who, text) in enumerate(lines)
        ],
        "session_1_date_time": "06.05.2024, 18:10:00",
        "qa": [
            {
                "question": "What did Eve bake for the street party?",
                "answer": "a plum cake",
                "evidence": ["D1:1"],
                "category": 1,
            }
        ],
    }


@dataclass
class Served:
    base: str
    home: Path
    retriever: object
    token: str | None = None


class LoopbackServer:
    """uvicorn serving ``app`` on a loopback port in a thread of this process."""

    def __init__(self, app):
        import uvicorn

        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "uvicorn did not start"
            time.sleep(0.05)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(30)


class Browser:
    """A Chromium driven by Selenium that remembers every URL it requested."""

    def __init__(self, driver, shots: Path):
        self.driver, self.shots, self.requested = driver, shots, []

    def visit(self, url: str) -> None:
        self.driver.get(url)
        self.collect()

    def collect(self) -> None:
        """Adds every URL the browser asked for since the last call (its DevTools network log)."""
        for entry in self.driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message["method"] == "Network.requestWillBeSent":
                self.requested.append(message["params"]["request"]["url"])

    def take(self) -> list[str]:
        """The URLs requested since the last ``take``."""
        self.collect()
        urls, self.requested = self.requested, []
        return urls

    def console_errors(self) -> list[str]:
        return [e["message"] for e in self.driver.get_log("browser") if e["level"] == "SEVERE"]

    def css(self, selector: str):
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def one(self, selector: str):
        found = self.css(selector)
        assert len(found) == 1, f"{selector}: {len(found)} elements"
        return found[0]

    def screenshot(self, name: str) -> Path:
        path = self.shots / f"{name}.png"
        self.driver.save_screenshot(str(path))
        return path


NETWORK_SCHEMES = ("http", "https", "ws", "wss", "ftp")


def off_machine(urls: list[str]) -> list[str]:
    """The URLs that leave this machine: any network scheme to a host other than loopback."""
    return [
        u
        for u in urls
        if urlsplit(u).scheme in NETWORK_SCHEMES and urlsplit(u).hostname not in ("127.0.0.1", "localhost", "::1")
    ]
