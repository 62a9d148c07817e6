"""NM_HOME's layout: every folder and file the project keeps in a home, named once.

A ``Home`` is a value: made from the home's root where the process starts (``resources/environment``
reads NM_HOME; ``Memory.open`` takes a folder) and passed down to whatever reads or writes there.
No other module spells a sub-path of the home (tests/test_house_rules.py checks it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Home:
    """The state folder of one memory: its layers, index, event spool, live chats and the rest."""

    root: Path

    @classmethod
    def at(cls, root: str | Path) -> Home:
        return cls(Path(root).expanduser())

    # -- the memory itself
    @property
    def storage(self) -> Path:
        """The layers' parquet frames (messages, L1 topics, L1.5 signals, L2 threads...)."""
        return self.root / "storage"

    @property
    def lancedb(self) -> Path:
        """The LanceDB index (vectors and full-text), unless NM_LANCEDB_URI puts it elsewhere."""
        return self.root / "lancedb"

    @property
    def live(self) -> Path:
        """The live chats' append-only logs."""
        return self.root / "live"

    @property
    def forget_journals(self) -> Path:
        """A forget's journal while it runs: what a process left half done is finished from it."""
        return self.live / "forgetting"

    @property
    def freshness(self) -> Path:
        """One stamp per chat: its memory is current without asking Dagster (cli/stamp.py)."""
        return self.root / "freshness"

    @property
    def import_scans(self) -> Path:
        """Cached scans of export folders."""
        return self.root / "imports" / "scans"

    @property
    def import_options(self) -> Path:
        """How each data folder's exports were read (--format, --tz, --day-first), remembered."""
        return self.root / "imports" / "options.json"

    @property
    def exports(self) -> Path:
        return self.root / "exports"

    @property
    def broken_builds(self) -> Path:
        """One record per chat whose build failed or whose input is bad: not tried again until it changes."""
        return self.root / "broken"

    # -- what questions leave behind
    @property
    def event_spool(self) -> Path:
        """Retrieval events not yet written to the index's events table."""
        return self.root / "events" / "spool"

    @property
    def recall_runs(self) -> Path:
        return self.root / "recall_runs"

    @property
    def search_runs(self) -> Path:
        """One record per API search (query, hits, the recall run it wrote)."""
        return self.root / "search_runs"

    @property
    def recall_cards(self) -> Path:
        """The day's recall cards: the top hits of each search, for people to read."""
        return self.root / "recall"

    @property
    def quarantine(self) -> Path:
        """What PII_STRICT kept out of the recall runs."""
        return self.root / "quarantine"

    @property
    def experiments(self) -> Path:
        return self.root / "experiments" / "experiments.jsonl"

    @property
    def alerts(self) -> Path:
        return self.root / "alerts" / "alerts.jsonl"

    @property
    def standing_regressions(self) -> Path:
        return self.root / "alerts" / "standing_regressions.json"

    # -- models
    @property
    def adaptation(self) -> Path:
        """Trained adapted layers of the embedder, and which one is current."""
        return self.root / "adaptation"

    @property
    def models(self) -> Path:
        """Model caches (the reranker's converted weights)."""
        return self.root / "models"

    @property
    def onnx_cache(self) -> Path:
        return self.models / "onnx"

    # -- the process around it
    @property
    def instance(self) -> Path:
        """The Dagster instance (runs, event log, schedules) of this home."""
        return self.root / "dagster"

    @property
    def command_socket(self) -> Path:
        """Where a running ``serve`` answers the home's commands (when the path fits AF_UNIX)."""
        return self.root / "serve.sock"

    @property
    def command_socket_pointer(self) -> Path:
        """Names the command socket when the home's path is too long for one inside it."""
        return self.root / "serve.sock.path"

    @property
    def running_server(self) -> Path:
        """The running ``serve``: pid, since, url, socket, data folder, chats."""
        return self.root / "serve.json"

    @property
    def logs(self) -> Path:
        return self.root / "logs"
