"""Forgetting live messages for good: by id, by author, by UTC time range, or a whole chat.

What a forget removes is first written to a journal (``<live>/forgetting/<chat>.<n>.json``,
fsynced), with the steps done so far; then, in order: the log (tombstones, or the file
deleted), the index rows (the messages; the chat's blocks and threads, which may quote them),
the parquet layers (forgotten rows dropped; a file still quoting them deleted, so the next
build recomputes it), retrieval events and spool files, recall-run files, every SQLite
database (Dagster's: event rows redacted, then VACUUM), every other text file (compute logs,
exports), and last the LanceDB compaction that drops old versions. Each step can be redone, so
a forget interrupted anywhere is finished by ``finish_unfinished`` (every start of the memory
calls it); the journal, which holds the text while it works, is deleted at the end.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from narrative_mirror.events.redaction import compact_events, redact_events, redact_spool
from narrative_mirror.home import Home
from narrative_mirror.index_store import IndexStore
from narrative_mirror.live.log import LiveLog, MessageError, check_chat
from narrative_mirror.live.redaction import (
    MARKER,
    Redactor,
    distinctive_words,
    is_parquet,
    is_sqlite,
    redact_parquet,
    redact_sqlite,
    redact_text_file,
)
from narrative_mirror.recall_runs import redact_runs
from narrative_mirror.storage import write_atomically

STEPS = ("live_log", "index", "layers", "events", "recall_runs", "dagster", "files", "compaction")
MIN_QUOTED_CHARS = 12  # a shorter forgotten text ("ok", "see you") is only removed where its id says so
_SKIPPED_SUFFIXES = (".lance", ".lock", "-wal", "-shm", "-journal")  # tables, locks, SQLite's own files
# What no forget reaches, said in every report (docs/live-memory.md says the same)
NOT_REACHED = (
    "files outside NM_HOME (the data folder's chat files and exports, copies, backups)",
    "single-word values of Dagster's structured fields (asset, partition and check names, run tags, run config): "
    "kept unless the whole message is that word; a whole chat's name stays a Dagster partition key",
)
DAGSTER_ELSEWHERE = "Dagster's PostgreSQL storage (NM_DAGSTER_PG_URL): not searched; its event logs are not redacted"


@dataclass(frozen=True)
class Selection:
    """Which messages of a chat to forget: ``ids``; or ``author`` and/or [``since``, ``until``)
    (naive UTC); or ``everything`` (the whole chat)."""

    ids: tuple[str, ...] | None = None
    author: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    everything: bool = False

    def __post_init__(self) -> None:
        modes = [
            self.ids is not None,
            any(v is not None for v in (self.author, self.since, self.until)),
            self.everything,
        ]
        if sum(modes) != 1:
            raise MessageError(
                "selection", "name the messages to forget: ids, or author and/or since/until, or the whole chat"
            )
        if self.ids is not None and not self.ids:
            raise MessageError("id", "at least one message id")
        if self.author is not None and not self.author.strip():
            raise MessageError("author", "must be a non-empty string")
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise MessageError("until", "must be later than since")

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("since", "until"):
            out[key] = out[key].isoformat() + "Z" if out[key] is not None else None
        out["ids"] = list(self.ids) if self.ids is not None else None
        return {k: v for k, v in out.items() if v not in (None, False)}


# A test sets this to stop (e.g. kill -9 itself) after a named step; None in every real run.
after_step: Callable[[str], None] | None = None


class Forgetting:
    """Forgets live messages from everything under ``home`` and from the index ``store``.

    ``runs_root``: the recall-run folder (default ``<home>/recall_runs``); ``spool_dir``: the
    event spool (default ``<home>/events/spool``); ``flush_events``: stores this process's
    spooled events first; ``on_changed(chat)``: runs once the chat's rows changed (a serving
    process drops its cached copy); ``dagster_elsewhere``: Dagster's records are in PostgreSQL,
    which a forget does not reach (its report says so)."""

    def __init__(
        self,
        log: LiveLog,
        store: IndexStore,
        home: Path,
        *,
        runs_root: Path | None = None,
        spool_dir: Path | None = None,
        flush_events: Callable[[], Any] | None = None,
        on_changed: Callable[[str], None] | None = None,
        dagster_elsewhere: bool = False,
    ):
        self.log, self.store, self.home = log, store, Path(home)
        self.not_reached = [*NOT_REACHED, *([DAGSTER_ELSEWHERE] if dagster_elsewhere else [])]
        layout = Home(self.home)
        self.runs_root = Path(runs_root) if runs_root is not None else layout.recall_runs
        self.spool_dir = Path(spool_dir) if spool_dir is not None else layout.event_spool
        self.flush_events, self.on_changed = flush_events, on_changed
        self.journals = layout.forget_journals

    # -- the journal -----------------------------------------------------------------------------
    def _journal_path(self, chat: str) -> Path:
        self.journals.mkdir(parents=True, exist_ok=True, mode=0o700)
        for n in itertools.count():
            path = self.journals / f"{chat}.{time.time_ns()}.{n}.json"
            if not path.exists():
                return path
        raise AssertionError("unreachable")

    def _save(self, path: Path, journal: dict) -> None:
        write_atomically(path, json.dumps(journal, ensure_ascii=False).encode())

    def pending(self) -> list[Path]:
        """Journals of forgets not finished (a process ended during one)."""
        return sorted(self.journals.glob("*.json")) if self.journals.is_dir() else []

    # -- forgetting ------------------------------------------------------------------------------
    def forget(self, chat: str, selection: Selection) -> dict[str, Any] | None:
        """Forget the selected messages of live chat ``chat`` everywhere; None when the chat has
        no live log or the selection names none of its messages. Returns what was removed, per
        store."""
        check_chat(chat)
        started = time.perf_counter()
        with self.log.locked(chat):
            if not self.log.exists(chat):
                return None
            chosen = self.log.select(
                chat, ids=selection.ids, author=selection.author, since=selection.since, until=selection.until
            )
            if not chosen:
                return None
            ids = [m.local_id for m in chosen]
            whole = selection.everything
            gone = set(ids)
            kept = [m.text for m in self.log.messages(chat) if m.local_id not in gone]
            redactor = self._redactor(chat, [m.text for m in chosen], kept, whole)
            journal = {
                "chat": chat,
                "selection": selection.to_json(),
                "ids": ids,
                "whole_chat": whole,
                "targets": redactor.to_json(),
                "done": [],
                "removed": {},
            }
            path = self._journal_path(chat)
            self._save(path, journal)
            self._step(path, journal, "live_log")
            self._step(path, journal, "index")
        return {**self._finish(path, journal), "seconds": round(time.perf_counter() - started, 3)}

    def finish_unfinished(self) -> list[dict[str, Any]]:
        """Finish every forget a process left half done (its journal is still there); returns
        their reports."""
        reports = []
        for path in self.pending():
            try:
                journal = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):  # torn before its first fsync: nothing was removed yet
                path.unlink(missing_ok=True)
                continue
            with self.log.locked(journal["chat"]):
                for step in ("live_log", "index"):
                    self._step(path, journal, step)
            reports.append(self._finish(path, journal))
        return reports

    def _finish(self, path: Path, journal: dict) -> dict[str, Any]:
        if self.on_changed is not None:
            self.on_changed(journal["chat"])
        for step in STEPS[2:]:
            self._step(path, journal, step)
        path.unlink(missing_ok=True)
        dir_fd = os.open(self.journals, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return {
            "chat": journal["chat"],
            "selection": journal["selection"],
            "ids": journal["ids"],
            "whole_chat": journal["whole_chat"],
            "removed": journal["removed"],
            "marker": MARKER,
            "not_reached": self.not_reached,
            "step_seconds": journal.get("step_seconds", {}),
        }

    def _step(self, path: Path, journal: dict, step: str) -> None:
        if step in journal["done"]:
            return
        started = time.perf_counter()
        journal["removed"][step] = getattr(self, f"_{step}")(journal)
        journal.setdefault("step_seconds", {})[step] = round(time.perf_counter() - started, 3)
        journal["done"].append(step)
        self._save(path, journal)
        if after_step is not None:
            after_step(step)

    def _redactor(self, chat: str, forgotten: list[str], kept_here: list[str], whole: bool) -> Redactor:
        kept = list(kept_here)
        rows = self.store.read_columns("messages", ["chat_file", "raw_text"])
        if rows is not None:
            kept += [
                t
                for c, t in zip(rows.column("chat_file").to_pylist(), rows.column("raw_text").to_pylist())
                if c != chat and t
            ]
        same = {t.strip().lower() for t in kept}
        quoted = [t for t in forgotten if len(t.strip()) >= MIN_QUOTED_CHARS and t.strip().lower() not in same]
        return Redactor(quoted, distinctive_words(forgotten, kept))

    @staticmethod
    def _redactor_of(journal: dict) -> Redactor:
        return Redactor(journal["targets"]["texts"], journal["targets"]["words"], journal["ids"], journal["chat"])

    # -- the steps (each can be redone) -------------------------------------------------------------
    def _live_log(self, journal: dict) -> dict[str, int]:
        chat = journal["chat"]
        if journal["whole_chat"]:
            return {"messages": self.log.remove_locked(chat), "log_deleted": 1}
        return {"messages": self.log.forget_locked(chat, journal["ids"])}

    def _index(self, journal: dict) -> dict[str, int]:
        chat = journal["chat"]
        if journal["whole_chat"]:
            messages = self.store.delete_chat("messages", chat)
        else:
            messages = self.store.delete_rows("messages", chat, [f"{chat}/{i}" for i in journal["ids"]])
        # L1 blocks and L2 threads quote their messages (summaries, keywords): the next build
        # recomputes them from the log without the forgotten ones
        out = {
            "messages_rows": messages,
            "blocks_rows": self.store.delete_chat("blocks", chat),
            "threads_rows": self.store.delete_chat("threads", chat),
        }
        if self.log.root.is_dir():
            self.log.mark_indexed(chat)  # other processes read the chat again
        return out

    def _home_files(self, kinds: Callable[[Path], bool]) -> list[Path]:
        """Files under the home that ``kinds`` picks, outside LanceDB tables, live logs, journals and
        the folders a step of their own redacts (spool, recall runs)."""
        found = []
        for folder, dirs, names in os.walk(self.home):
            dirs[:] = [
                d
                for d in dirs
                if not d.endswith(_SKIPPED_SUFFIXES)
                and Path(folder, d) not in (self.journals, self.spool_dir, self.runs_root)
            ]
            for name in names:
                path = Path(folder, name)
                if path.parent == self.log.root or name.endswith(_SKIPPED_SUFFIXES) or not path.is_file():
                    continue
                if kinds(path):
                    found.append(path)
        return found

    def _layers(self, journal: dict) -> dict[str, int]:
        redactor = self._redactor_of(journal)
        return redact_parquet(
            self._home_files(is_parquet), journal["chat"], set(journal["ids"]), journal["whole_chat"], redactor
        )

    def _events(self, journal: dict) -> dict[str, int]:
        if self.flush_events is not None:
            self.flush_events()  # spooled events first, so the table holds every one
        redactor = self._redactor_of(journal)
        spool = redact_spool(self.spool_dir, redactor.same_length)
        changed = redact_events(
            self.store.uri,
            redactor.redact,
            chat=journal["chat"] if journal["whole_chat"] else None,
            marker=MARKER,
            storage_options=self.store.storage_options,
            forgotten_ids={journal["chat"]: set(journal["ids"])},
        )
        return {"events_redacted": changed, "spool_files_redacted": spool}

    def _recall_runs(self, journal: dict) -> dict[str, int]:
        redactor = self._redactor_of(journal)
        ids = None if journal["whole_chat"] else set(journal["ids"])
        return {
            "files_redacted": redact_runs(
                redactor.redact_any, redactor.found, journal["chat"], ids, marker=MARKER, root=self.runs_root
            )
        }

    def _dagster(self, journal: dict) -> dict[str, int]:
        redactor = self._redactor_of(journal)
        databases = self._home_files(is_sqlite)
        return {"databases": len(databases), "values_redacted": sum(redact_sqlite(p, redactor) for p in databases)}

    def _files(self, journal: dict) -> dict[str, int]:
        redactor = self._redactor_of(journal)
        candidates = self._home_files(lambda p: not is_sqlite(p) and not is_parquet(p))
        return {"files_redacted": sum(redact_text_file(p, redactor) for p in candidates)}

    def _compaction(self, journal: dict) -> dict[str, int]:
        upkeep = self.store.maintain(keep_versions_for=timedelta(0))
        versions = sum(t["versions"] for t in upkeep["before"].values()) - sum(
            t["versions"] for t in upkeep["after"].values()
        )
        return {
            "index_old_versions": versions,
            "events_old_versions": compact_events(self.store.uri, self.store.storage_options),
        }
