"""The event spool: every event (and citation update) is appended and fsynced to a file before its
id is returned, so a crash loses nothing that was acknowledged; the writer stores from it.

One spool file per ``EventLog``: ``<folder>/<name>.jsonl`` with ``<name>.lock``, which the log
holds (``flock``) while it lives. A spool file whose lock nobody holds belongs to a process that
ended (kill -9, power loss): the next ``EventLog`` on the folder stores its items (``orphans``).
Offsets are logical (bytes ever appended to this spool), so the writer's position stays valid
when the file is truncated (everything stored) or rewritten (its folder was deleted, or the
stored head grew large).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

log = logging.getLogger(__name__)

COMPACT_BYTES = 4 << 20  # rewrite the file once this much of it is stored and it is never idle
READ_BYTES = 4 << 20


def encode_event(row: dict) -> bytes:
    return (json.dumps({"event": {**row, "created_at": row["created_at"].isoformat()}}) + "\n").encode()


def encode_citation(
    event_id: str, cited: list[str], confidence: float | None, per_id: list[float] | None = None
) -> bytes:
    return (
        json.dumps(
            {
                "cite": {
                    "event_id": event_id,
                    "cited_ids": cited,
                    "citation_confidence": confidence,
                    "cited_confidences": per_id or [],
                }
            }
        )
        + "\n"
    ).encode()


def decode(line: bytes) -> tuple[str, dict] | None:
    """("event", row) or ("cite", {...}); None for a torn line (a crash during its write: its id
    was never returned, the fsync had not finished)."""
    try:
        item = json.loads(line)
    except ValueError:
        return None
    if "event" in item:
        row = item["event"]
        row["created_at"] = datetime.fromisoformat(row["created_at"])
        return "event", row
    if "cite" in item:
        return "cite", item["cite"]
    return None


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Spool:
    """This process's spool file in ``folder`` (created 0700; files 0600)."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.name = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self._lock = threading.Lock()
        self._start = 0  # logical offset of the file's first byte
        self._end = 0  # logical offset after the last appended byte
        self._committed = 0  # logical offset up to which everything is stored
        self._sync_lock = threading.Lock()
        self._synced = 0  # logical offset up to which the file is fsynced
        self._fd = self._lock_fd = -1
        self._open(b"")

    @property
    def path(self) -> Path:
        return self.folder / f"{self.name}.jsonl"

    @property
    def end(self) -> int:
        return self._end

    def _open(self, content: bytes) -> None:
        """(Re)create this spool's files holding ``content`` (the unstored tail), fsynced."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if self._lock_fd < 0 or os.fstat(self._lock_fd).st_nlink == 0:  # a second flock of ours would conflict
            lock_fd = os.open(self.folder / f"{self.name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if self._lock_fd >= 0:
                os.close(self._lock_fd)
            self._lock_fd = lock_fd
        tmp = self.folder / f".{self.name}.tmp"
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        _write_all(fd, content)
        os.fsync(fd)
        os.replace(tmp, self.path)
        _fsync_folder(self.folder)
        os.close(fd)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = fd

    def _tail(self) -> bytes:
        return os.pread(self._fd, self._end - self._committed, self._committed - self._start)

    def append(self, data: bytes) -> None:
        """Append one encoded line and fsync it (the caller may acknowledge it after this)."""
        with self._lock:
            if os.fstat(self._fd).st_nlink == 0:  # the folder was deleted (home recreated): start anew
                log.warning(
                    "retrieval events: spool %s was deleted; recreating it with %d unstored bytes",
                    self.path,
                    self._end - self._committed,
                )
                self._open(self._tail())
                self._start = self._committed
            _write_all(self._fd, data)
            self._end += len(data)
            mine = self._end
        with self._sync_lock:  # group commit: one fsync covers every line written before it
            if self._synced >= mine:
                return
            with self._lock:  # a file rewritten meanwhile was fsynced whole by _open
                target, fd = self._end, os.dup(self._fd)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self._synced = target

    def read(self, offset: int, max_lines: int) -> tuple[list[bytes], int]:
        """Up to ``max_lines`` whole lines from logical ``offset``; and the offset after them."""
        with self._lock:
            size = min(self._end - offset, READ_BYTES)
            data = os.pread(self._fd, size, offset - self._start) if size > 0 else b""
        lines: list[bytes] = []
        position = 0
        while len(lines) < max_lines:
            newline = data.find(b"\n", position)
            if newline < 0:
                break
            lines.append(data[position:newline])
            position = newline + 1
        return lines, offset + position

    def commit(self, offset: int) -> None:
        """Everything before logical ``offset`` is stored: empty the file when that is all of it."""
        with self._lock:
            self._committed = offset
            if offset == self._end and self._end > self._start:
                os.ftruncate(self._fd, 0)
                self._start = offset
            elif offset - self._start > COMPACT_BYTES:
                self._open(self._tail())
                self._start = offset

    def close(self) -> bool:
        """Release the spool; its files are removed when everything was stored (True), else kept
        for the next start to store."""
        with self._lock:
            empty = self._committed == self._end
            if empty:
                for path in (self.path, self.folder / f"{self.name}.lock"):
                    path.unlink(missing_ok=True)
            for fd in (self._fd, self._lock_fd):
                if fd >= 0:
                    os.close(fd)
            self._fd = self._lock_fd = -1
            return empty


class Orphan:
    """A spool file left by a process that ended, locked by us while we store it."""

    def __init__(self, path: Path, lock_fd: int):
        self.path, self._lock_fd = path, lock_fd

    def items(self) -> list[tuple[str, dict]]:
        return [item for line in self.path.read_bytes().split(b"\n") if line and (item := decode(line))]

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
        self.path.with_suffix(".lock").unlink(missing_ok=True)
        self.release()

    def release(self) -> None:
        os.close(self._lock_fd)


def orphans(folder: str | Path) -> Iterator[Orphan]:
    """The spool files in ``folder`` whose lock no living ``EventLog`` holds, each locked for the
    caller (``remove`` once stored, ``release`` to leave it for a later start)."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    for path in sorted(folder.glob("*.jsonl")):
        try:
            lock_fd = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            continue
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # its process is alive
            os.close(lock_fd)
            continue
        if not path.exists():  # stored and removed by another process meanwhile
            os.close(lock_fd)
            continue
        yield Orphan(path, lock_fd)
