"""Finding and replacing forgotten text in what a home stores besides the log and the index:
``Redactor`` (the forgotten messages' texts and the words only they used, also as JSON escapes
them), and its passes over parquet layers, SQLite databases (Dagster's) and other text files.

A message "quoted" elsewhere is either its whole text, or one of its distinctive words: a word
of 4+ letters, not a stop word, that no kept message of any chat uses (a query such as "what is
the vault code k7q..." quotes the code, not the sentence). Replacing those words everywhere may
also blank them in another chat's query or log line: forgetting errs on the side of removing.
"""

from __future__ import annotations

import bisect
import json
import re
import sqlite3
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import polars as pl

from narrative_mirror.layers.text import STOPWORDS
from narrative_mirror.storage import write_atomically, write_frame

MARKER = "[forgotten]"
MIN_WORD_CHARS = 4
_WORD = re.compile(rf"[^\W_]{{{MIN_WORD_CHARS},}}")
_ANY_WORD = re.compile(r"\w+")
_QUOTED = re.compile(r"""(['"])([^'"\s]{1,200})\1""")  # an id as a list or a log line quotes it: 'm5', "m5"
_SPACE = re.compile(r"\s")
SQLITE_MAGIC = b"SQLite format 3\x00"
PARQUET_MAGIC = b"PAR1"
SQLITE_BUSY_ATTEMPTS = 20


def words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def distinctive_words(forgotten: Iterable[str], kept: Iterable[str]) -> list[str]:
    """Words of the forgotten texts that no kept text uses (stop words never count)."""
    mine: set[str] = set()
    for text in forgotten:
        mine |= words(text)
    mine -= STOPWORDS
    for text in kept:
        if not mine:
            break
        mine -= words(text)
    return sorted(mine)


def _forms(text: str) -> set[str]:
    """``text`` as written, and as a JSON string body (escaped, ASCII-escaped, escaped twice)."""
    once = json.dumps(text, ensure_ascii=False)[1:-1]
    ascii_once = json.dumps(text)[1:-1]
    return {text, once, ascii_once, json.dumps(once)[1:-1], json.dumps(ascii_once)[1:-1]}


class Redactor:
    """Replaces the forgotten texts (every form, any case) and, where ``words`` is on, their
    distinctive words (whole words only: ``unresolved_gold_share`` does not hold the word
    ``share``) by ``MARKER``. Words are replaced in free text and JSON values (queries, snippets,
    log lines); in SQLite rows only in free text (``redact_stored_value``: serialized records name
    checks and assets with plain words). ``ids`` (of ``chat``): the forgotten messages' ids,
    replaced in free text (``redact_free``). Matching is one substring search per text form and
    one word scan, not a regex of thousands of alternatives: a whole chat's texts are searched in
    linear passes."""

    def __init__(
        self, texts: Iterable[str], distinctive: Iterable[str] = (), ids: Iterable[str] = (), chat: str | None = None
    ):
        self.texts = sorted({t for t in texts if t.strip()}, key=len, reverse=True)
        self.ids = frozenset(ids)  # the forgotten messages' local ids (a client chose them: they may be words)
        self._message_ids = re.compile(re.escape(chat) + r"""/([^\s'",\])]+)""") if chat and self.ids else None
        self.chat = chat
        self.words = sorted(set(distinctive))
        self._forms = sorted({f.lower() for t in self.texts for f in _forms(t)}, key=len, reverse=True)
        self._negative_lengths = [-len(f) for f in self._forms]  # ascending: forms longer than a text are skipped
        self._word_set = {w.lower() for w in self.words}

    def _spans(self, text: str, words: bool) -> list[tuple[int, int]]:
        """Where the forgotten texts and words are in ``text``: sorted, not overlapping."""
        low = text.lower()
        if len(low) != len(text):  # a character whose lower case is longer: match the case as written
            low = text
        found = []
        for form in self._forms[bisect.bisect_left(self._negative_lengths, -len(text)) :]:
            at = low.find(form)
            while at >= 0:
                found.append((at, at + len(form)))
                at = low.find(form, at + len(form))
        if words and self._word_set:
            found += [m.span() for m in _ANY_WORD.finditer(text) if m.group().lower() in self._word_set]
        spans: list[tuple[int, int]] = []
        for start, end in sorted(found, key=lambda span: (span[0], -span[1])):
            if spans and start < spans[-1][1]:
                spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
            else:
                spans.append((start, end))
        return spans

    def _replace(self, text: str, words: bool, filler: Callable[[str], str]) -> str:
        spans = self._spans(text, words)
        if not spans:
            return text
        parts, last = [], 0
        for start, end in spans:
            parts += [text[last:start], filler(text[start:end])]
            last = end
        return "".join(parts) + text[last:]

    def found(self, text: str, words: bool = True) -> bool:
        return bool(self._spans(text, words))

    def redact(self, text: str, words: bool = True) -> str:
        return self._replace(text, words, lambda _: MARKER)

    def redact_free(self, text: str) -> str:
        """Free text (a log line, a check's description, a metadata table): the texts, the words,
        and the forgotten ids where quoted ('m5', "m5") or whole (``<chat>/m5``)."""
        out = self.redact(text)
        if self.ids:
            out = _QUOTED.sub(lambda m: f"{m[1]}{MARKER}{m[1]}" if m[2] in self.ids else m[0], out)
            if self._message_ids is not None:
                out = self._message_ids.sub(lambda m: f"{self.chat}/{MARKER}" if m[1] in self.ids else m[0], out)
        return out

    def mentions(self, text: str) -> bool:
        """Whether ``text`` (raw: JSON as stored) holds a forgotten text, word or id."""
        if self.found(text):
            return True
        if not self.ids:
            return False
        return (
            any(m[2] in self.ids for m in _QUOTED.finditer(text))
            or self._message_ids is not None
            and any(m[1] in self.ids for m in self._message_ids.finditer(text))
        )

    def redact_any(self, value):
        """``value`` (JSON-like: dicts, lists, strings) with every string value redacted (keys kept)."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, list):
            return [self.redact_any(v) for v in value]
        if isinstance(value, dict):
            return {k: self.redact_any(v) for k, v in value.items()}
        return value

    def found_bytes(self, data: bytes, words: bool = True) -> bool:
        return self.found(data.decode("utf-8", errors="surrogateescape"), words)

    def same_length(self, data: bytes) -> bytes:
        """``data`` with each match overwritten by as many bytes (a file read by offsets, e.g. a
        spool another process appends to, keeps its length)."""

        def filler(match: str) -> str:
            size = len(match.encode("utf-8", errors="surrogateescape"))
            return (MARKER + "#" * size)[:size] if size >= len(MARKER) else "#" * size

        text = data.decode("utf-8", errors="surrogateescape")
        return self._replace(text, True, filler).encode("utf-8", errors="surrogateescape")

    def to_json(self) -> dict:
        return {"texts": self.texts, "words": self.words}


def _head(path: Path, size: int) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read(size)
    except OSError:
        return b""


def is_sqlite(path: Path) -> bool:
    return _head(path, len(SQLITE_MAGIC)) == SQLITE_MAGIC


def is_parquet(path: Path) -> bool:
    return path.suffix == ".parquet" or _head(path, 4) == PARQUET_MAGIC


# -- parquet layers -------------------------------------------------------------------------
def _frame_found(frame: pl.DataFrame, redactor: Redactor) -> bool:
    for name, dtype in frame.schema.items():
        if dtype == pl.String or isinstance(dtype, pl.List | pl.Struct):
            if any(redactor.found(json.dumps(v, default=str)) for v in frame[name].to_list() if v is not None):
                return True
    return False


# A chat's own layer files (``<asset>/<chat>.parquet``) are deleted by a forget: blocks, signals and
# threads list and place their messages, so a file with rows dropped would disagree with the log,
# and the next build rebuilds the chat from its messages on (a missing output is repaired with
# everything after it). Its vectors are kept, without the forgotten rows: the rebuild reuses them.
KEPT_LAYERS = ("message_embeddings",)


def redact_parquet(
    paths: Iterable[Path], chat: str, ids: set[str], whole_chat: bool, redactor: Redactor
) -> dict[str, int]:
    """The parquet files ``paths`` (layers: ``<asset>/<partition>.parquet``): the chat's own
    files are deleted (``KEPT_LAYERS`` lose only the forgotten rows unless the whole chat is
    forgotten); in the others the forgotten messages' rows (by ``message_id`` or ``chat_file`` +
    ``local_id``) are dropped, and a file that still quotes them (block summaries, keywords,
    thread titles) is deleted: Dagster's checks find it missing and the next build recomputes it
    (and everything after it) from the log without the forgotten messages."""
    out = {"files_deleted": 0, "files_rewritten": 0, "rows_removed": 0}
    message_ids = {f"{chat}/{i}" for i in ids}
    for path in sorted(paths):
        if path.stem == chat and (whole_chat or path.parent.name not in KEPT_LAYERS):
            path.unlink(missing_ok=True)
            out["files_deleted"] += 1
            continue
        frame = pl.read_parquet(path)
        keep = frame
        if "message_id" in frame.columns:
            keep = frame.filter(~pl.col("message_id").is_in(sorted(message_ids)))
        elif {"chat_file", "local_id"} <= set(frame.columns):
            keep = frame.filter(~((pl.col("chat_file") == chat) & pl.col("local_id").is_in(sorted(ids))))
        if _frame_found(keep, redactor):
            path.unlink()
            out["files_deleted"] += 1
        elif keep.height != frame.height:
            write_frame(path, keep)
            out["files_rewritten"] += 1
            out["rows_removed"] += frame.height - keep.height
    return out


# -- SQLite (Dagster's runs, event logs, schedules) ------------------------------------------
def _busy(action: Callable[[], None]) -> None:
    for attempt in range(SQLITE_BUSY_ATTEMPTS):
        try:
            return action()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc) or attempt == SQLITE_BUSY_ATTEMPTS - 1:
                raise
            time.sleep(0.1 * (attempt + 1))


# Keys of Dagster's serialized records whose strings are free text even without a space (a
# metadata text or markdown value, a log line, a description)
FREE_TEXT_KEYS = frozenset({"text", "md_str", "message", "user_message", "description"})


def redact_stored_value(text: str, redactor: Redactor, free: bool = False) -> str:
    """A stored text value (a SQLite cell): JSON is read and each string in it redacted (nested
    JSON too); free text (anything with a space, or under ``FREE_TEXT_KEYS``: log lines,
    descriptions, metadata texts) loses texts, words and ids; any other value (a class or enum
    name, an asset key, a tag, a partition) only whole forgotten texts, so Dagster's records stay
    readable."""
    if text.lstrip()[:1] in ("{", "["):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict | list):
            new = _redact_json(data, redactor)
            return text if new == data else json.dumps(new, ensure_ascii=False)
    return redactor.redact_free(text) if free or _SPACE.search(text) else redactor.redact(text, words=False)


def _redact_json(value, redactor: Redactor, key: str | None = None):
    if isinstance(value, str):
        return redact_stored_value(value, redactor, free=key in FREE_TEXT_KEYS)
    if isinstance(value, list):
        return [_redact_json(v, redactor) for v in value]
    if isinstance(value, dict):
        return {k: _redact_json(v, redactor, k) for k, v in value.items()}
    return value


def redact_sqlite(path: Path, redactor: Redactor) -> int:
    """Redact every text and blob value of every table of the SQLite database at ``path``
    (Dagster's serialized events, metadata, run logs: ``redact_stored_value``; blobs: whole
    texts); then VACUUM and truncate the write-ahead log, so no free page or WAL frame keeps a
    copy. Returns the values changed."""
    connection = sqlite3.connect(path, timeout=10)
    changed = 0
    try:
        tables = [
            name
            for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
            if not name.startswith("sqlite_")
        ]
        for table in tables:
            columns = [row[1] for row in connection.execute(f'PRAGMA table_info("{table}")')]
            for column in columns:
                rows = connection.execute(
                    f'SELECT rowid, "{column}" FROM "{table}" WHERE typeof("{column}") IN (\'text\', \'blob\')'
                ).fetchall()
                for rowid, value in rows:
                    if isinstance(value, str):
                        if not redactor.mentions(value):
                            continue
                        new = redact_stored_value(value, redactor)
                    else:
                        data = bytes(value)
                        if not redactor.found_bytes(data, words=False):
                            continue
                        new = redactor.redact(data.decode("utf-8", errors="surrogateescape"), words=False).encode(
                            "utf-8", errors="surrogateescape"
                        )
                    if new == value:
                        continue
                    _busy(
                        lambda: connection.execute(f'UPDATE "{table}" SET "{column}" = ? WHERE rowid = ?', (new, rowid))
                    )
                    changed += 1
        _busy(connection.commit)
        if changed:
            _busy(lambda: connection.execute("VACUUM"))
        _busy(lambda: connection.execute("PRAGMA wal_checkpoint(TRUNCATE)"))
    finally:
        connection.close()
    return changed


# -- everything else that is text -------------------------------------------------------------
LOG_SUFFIXES = (".err", ".out", ".log", ".txt", ".md")  # free text: words and ids too (not config files)


def redact_text_file(path: Path, redactor: Redactor) -> bool:
    """Rewrite ``path`` with the forgotten text replaced (atomically); False when it holds none.
    JSON and JSON-lines files have their values redacted, words included; logs (``LOG_SUFFIXES``:
    Dagster's compute logs) their texts, words and ids; other files (configuration) their whole
    texts only, as written or escaped."""
    try:
        data = path.read_bytes()
    except OSError:
        return False
    text = data.decode("utf-8", errors="surrogateescape")
    if not (redactor.mentions(text) if path.suffix in LOG_SUFFIXES else redactor.found(text)):
        return False
    new = None
    try:
        if path.suffix == ".json":
            new = json.dumps(redactor.redact_any(json.loads(text)), ensure_ascii=False, indent=1) + "\n"
        elif path.suffix == ".jsonl":
            new = "".join(
                json.dumps(redactor.redact_any(json.loads(line)), ensure_ascii=False) + "\n"
                for line in text.splitlines()
                if line.strip()
            )
    except ValueError:  # not JSON after all: treated as text
        new = None
    if new is None:
        new = redactor.redact_free(text) if path.suffix in LOG_SUFFIXES else redactor.redact(text, words=False)
    if new == text:
        return False
    write_atomically(path, new.encode("utf-8", errors="surrogateescape"))
    return True
