"""Chats whose build failed, remembered so that commands report them again and stop re-running them.

When a chat's build fails, on its own input (a bad chat, export or ARC file: a ``problem``, exit
code 2) or otherwise (a step or a blocking check: a ``failure``, exit code 1), the source versions
it failed with are written to ``$NM_HOME/broken/<chat>.json`` with the one-line reason. Later
commands report that line again without launching a Dagster run, and never take the chat as
built, until the chat's source versions, the config files, the prompts or the project's code
change (or ``build --repair`` retries it); a successful build forgets the record. (Dagster alone would say a chat whose blocking check failed is up to date: its asset
was materialized before the check ran.) Plain Python: no Dagster.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from cli.stamp import code_digest
from narrative_mirror import sources as source_versions
from narrative_mirror.home import Home

NOT_RETRIED = "(unchanged since it failed: not run again until the file changes)"
PROBLEM = "problem"  # the chat's own input is bad
FAILURE = "failure"  # a step or a blocking check failed


class BrokenChats:
    def __init__(self, home: Path):
        self.home = Home.at(home)
        self.folder = self.home.broken_builds

    def _path(self, chat: str) -> Path:
        return self.folder / f"{chat}.json"

    def _record(self, chat: str) -> dict | None:
        try:
            record = json.loads(self._path(chat).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return None
        return record if isinstance(record, dict) and isinstance(record.get("problem"), str) else None

    def known(self, chat: str, versions: dict | None) -> tuple[str, str] | None:
        """(PROBLEM or FAILURE, the line) ``chat`` failed with, if its sources and the code are as
        they were then."""
        record = self._record(chat) if versions else None
        if record is None or record.get("versions") != versions or record.get("code") != _code(self.home):
            return None
        return self.recorded(chat), record["problem"]

    def recorded(self, chat: str) -> str | None:
        """PROBLEM or FAILURE when a failure of ``chat`` is on record, whatever its versions."""
        record = self._record(chat)
        return None if record is None else FAILURE if record.get("kind") == FAILURE else PROBLEM

    def last_failure(self, chat: str) -> str | None:
        """The line ``chat``'s last build failed with, if it is on record."""
        record = self._record(chat)
        return record["problem"] if record else None

    def remember(self, chat: str, versions: dict | None, problem: str, kind: str = PROBLEM) -> None:
        if not versions:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self._path(chat)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(
            json.dumps({"versions": versions, "code": _code(self.home), "problem": problem, "kind": kind}),
            encoding="utf-8",
        )
        os.replace(tmp, path)

    def forget(self, chat: str) -> None:
        self._path(chat).unlink(missing_ok=True)


def _code(home: Home) -> dict:
    """What besides the chat's own sources decides its build: the code, the config and prompts."""
    return {
        "code": code_digest(),
        "config": source_versions.config_versions(home),
        "prompts": source_versions.prompt_versions(),
    }
