"""Standing regressions: evaluations whose latest checks failed, kept until the metric recovers
or the baseline is moved (``narrative-mirror baseline pin``).

A failed check fails (ERROR) or warns (WARN) the run that computed it, but the next ``eval`` with
nothing changed runs nothing, so the failure would be invisible until the nightly run. The
evaluation asset records its failed checks here after every evaluation (an evaluation whose checks
all pass removes its entry); ``eval``, ``/api/health`` and the inspector read it.

One JSON file under NM_HOME: {"<asset>/<partition>": {"asset", "partition", "run_id", "time",
"checks": [{"check", "severity", "description"}]}}, replaced atomically under a lock.
"""

from __future__ import annotations

import fcntl
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from narrative_mirror.home import Home
from narrative_mirror.storage import write_atomically

ERROR = "ERROR"


def standing_path(home: Path) -> Path:
    return Home(Path(home)).standing_regressions


def read(home: Path) -> dict[str, dict[str, Any]]:
    """Every standing regression, keyed ``<asset>/<partition>``; {} when none (or no file)."""
    path = standing_path(home)
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not a JSON object of standing regressions ({exc})") from exc


def record(home: Path, asset: str, partition: str, run_id: str, failed: list[dict[str, str]]) -> None:
    """The checks of ``asset``/``partition``'s newest evaluation that failed (each ``check``,
    ``severity``, ``description``); an empty list clears its entry."""
    key = f"{asset}/{partition}"

    def change(entries: dict) -> None:
        if failed:
            entries[key] = {
                "asset": asset,
                "partition": partition,
                "run_id": run_id,
                "checks": failed,
                "time": datetime.now(UTC).isoformat(timespec="seconds"),
            }
        else:
            entries.pop(key, None)

    _update(home, change)


def accept(home: Path, asset: str, partition: str) -> bool:
    """The baseline of ``asset``/``partition`` was moved on purpose: its regression no longer
    stands. Returns whether one did."""
    found = []
    _update(home, lambda entries: found.append(entries.pop(f"{asset}/{partition}", None)))
    return found[0] is not None


def describe(entry: dict[str, Any]) -> str:
    """One line: which evaluation, which checks, and how to end it."""
    checks = "; ".join(f"{c['check']} {c['severity']}: {c['description']}" for c in entry["checks"])
    return (
        f"standing regression of {entry['asset']} on {entry['partition']} since run {entry['run_id'][:8]}: "
        f"{checks} (it stands until the metric recovers or `narrative-mirror baseline pin "
        f"--chat {entry['partition']} --asset {entry['asset']}` accepts it)"
    )


def is_error(entry: dict[str, Any]) -> bool:
    return any(c["severity"] == ERROR for c in entry["checks"])


class StandingView:
    """``read`` of one home, read again only when the file changed: health answers from memory."""

    def __init__(self, home: Path):
        self.home = Path(home)
        self._seen: tuple[int, int] | None = None
        self._entries: dict[str, dict[str, Any]] = {}

    def current(self) -> dict[str, dict[str, Any]]:
        try:
            stat = standing_path(self.home).stat()
        except FileNotFoundError:
            self._seen, self._entries = None, {}
            return {}
        if (stat.st_mtime_ns, stat.st_size) != self._seen:
            self._entries = read(self.home)
            self._seen = (stat.st_mtime_ns, stat.st_size)
        return self._entries


def _update(home: Path, change) -> None:
    path = standing_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    with (path.parent / ".standing.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        entries = read(home)
        before = json.dumps(entries, sort_keys=True)
        change(entries)
        if json.dumps(entries, sort_keys=True) != before:
            write_atomically(path, json.dumps(entries, indent=1, sort_keys=True).encode("utf-8"))
