"""What a search answered, kept beside its recall run (the memory-API design's supplementary evidence):

- ``search_runs/YYYYMMDD/run_<epoch_ms>.json``: one append-only file per search: ``query``,
  ``chat``, ``params``, ``event_id``, ``hits`` (the hits as the API returned them: id, text, score,
  reasons, ...), ``recall_run`` (its recall-run file, relative to the state folder) and ``ts``.
  The API's ``evidence_path`` names this file.
- ``recall/cards_YYYYMMDD.json``: the day's recall cards, a snapshot rewritten atomically after
  each search: ``{"date", "cards": [...]}``, one card per search, oldest first: ``ts``, ``chat``,
  ``query``, ``top`` (its first ``CARD_ITEMS`` hits: id, tier, score, text cut to ``CARD_TEXT``
  characters), ``search_run`` and ``recall_run``. A glance at what was recalled that day: the
  last ``MAX_CARDS`` searches (the search runs keep every one), so a busy day's rewrite stays
  small; not fsynced (a snapshot, rebuilt by the next search).

Both live under the recall runs' parent folder (``<NM_HOME>`` by default), in UTC; the search runs
are bounded like the recall runs (``recall_runs.write_record``: retention.toml's keep_last).
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from narrative_mirror.home import Home
from narrative_mirror.recall_runs import runs_dir, utc_iso, write_record

SEARCH_RUNS_DIR = Home(Path()).search_runs.name  # as responses name it, relative to the home
CARD_ITEMS = 3
CARD_TEXT = 160
MAX_CARDS = 200
_cards_lock = threading.Lock()  # one writer per process; flock orders processes


def relative(path: Path, base: Path) -> str:
    """``path`` under ``base`` as a POSIX path (what responses and records show, never absolute)."""
    return str(PurePosixPath(*path.relative_to(base).parts))


def record_search(
    query: str,
    chat: str,
    params: Mapping,
    event_id: str,
    hits: Sequence[Mapping],
    tiers: Mapping[str, int],
    recall_run: Path | None,
    *,
    root: Path | None = None,
    now: datetime | None = None,
) -> Path:
    """Write the search-run file and add the search's card to the day's cards; ``root`` is the
    recall-run folder (default ``<NM_HOME>/recall_runs``). Returns the search-run path."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    base = runs_dir(root).parent
    recall = relative(recall_run, base) if recall_run is not None else None
    path = write_record(
        Home(base).search_runs,
        {
            "query": query,
            "chat": chat,
            "params": dict(params),
            "event_id": event_id,
            "hits": list(hits),
            "recall_run": recall,
            "ts": utc_iso(now),
        },
        now,
    )
    card = {
        "ts": utc_iso(now),
        "chat": chat,
        "query": query,
        "top": [
            {
                "id": h["id"],
                "tier": tiers.get(h["id"]),
                "score": h.get("score"),
                "text": str(h.get("text", ""))[:CARD_TEXT],
            }
            for h in hits[:CARD_ITEMS]
        ],
        "search_run": relative(path, base),
        "recall_run": recall,
    }
    add_card(Home(base).recall_cards / f"cards_{now:%Y%m%d}.json", card, f"{now:%Y%m%d}")
    return path


def add_card(path: Path, card: Mapping, date: str) -> None:
    """Append ``card`` to the day's snapshot ``path`` (rewritten atomically; a file that cannot
    be read is set aside as ``<name>.unreadable`` rather than lost)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with _cards_lock, open(path.with_name(f".{path.name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cards: list = []
        if path.exists():
            try:
                cards = json.loads(path.read_text(encoding="utf-8"))["cards"]
            except (ValueError, KeyError, TypeError):
                path.replace(path.with_name(path.name + ".unreadable"))
        cards = [*cards, dict(card)][-MAX_CARDS:]
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"date": date, "cards": cards}, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)  # readers never see a half-written snapshot
