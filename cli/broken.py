"""Chats whose input is broken, remembered so that commands stop re-running them.

When a chat's build fails on its own input (a bad chat, export or ARC file: exit code 2), the
source versions it failed with are written to ``$NM_HOME/broken/<chat>.json`` with the one-line
problem. Later commands report that line again without launching a Dagster run, until the chat's
source versions or the project's code change; a successful build forgets the record. Plain
Python: no Dagster.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from cli.stamp import code_digest

NOT_RETRIED = "(unchanged since it failed: not run again until the file changes)"


class BrokenChats:
    def __init__(self, home: Path):
        self.folder = Path(home) / "broken"

    def _path(self, chat: str) -> Path:
        return self.folder / f"{chat}.json"

    def known(self, chat: str, versions: dict | None) -> str | None:
        """The problem ``chat`` failed with, if its sources and the code are as they were then."""
        if not versions:
            return None
        try:
            record = json.loads(self._path(chat).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return None
        if not isinstance(record, dict) or record.get("versions") != versions or record.get("code") != code_digest():
            return None
        return record.get("problem")

    def remember(self, chat: str, versions: dict | None, problem: str) -> None:
        if not versions:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self._path(chat)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"versions": versions, "code": code_digest(), "problem": problem}), encoding="utf-8")
        os.replace(tmp, path)

    def forget(self, chat: str) -> None:
        self._path(chat).unlink(missing_ok=True)
