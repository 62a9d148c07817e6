"""API tokens scoped to chat partitions (no Dagster).

A token file is JSON; it stores only SHA-256 hashes of the tokens, never a token itself::

    {
      "version": 1,
      "tokens": [
        {"name": "ana-laptop", "sha256": "<64 lowercase hex digits>",
         "chats": ["Chat_1_Emi_Elise", "tiny_*"], "created": "2026-11-25T10:00:00Z"}
      ]
    }

- ``name``: unique per file; letters, digits and ``._@-`` (at most 64 characters).
- ``sha256``: hex SHA-256 of the token's UTF-8 bytes; unique per file.
- ``chats``: the chat keys (file stems) the token may read; ``fnmatch`` globs (``*``, ``?``,
  ``[...]``, matched case-sensitively) are allowed, ``["*"]`` reads every chat. No path
  separators or control characters.
- ``rights``: optional, what the token may do in its chats: ``read``, ``add`` (messages to a
  live chat), ``forget``, ``replace`` (let a live chat replace a chat built from a chat file:
  its messages leave the index for every reader, so ``add`` never implies it); default
  ``["read"]`` (tokens written before rights existed read only).
- ``created``: optional, informative.
- ``expires``: optional UTC time (``2026-12-31T00:00:00Z``) from which the token is refused.

``add_token`` creates the file (mode 0600) or adds to it and returns the secret once (it cannot be
recovered from the file); ``remove_token`` revokes by name; ``load_tokens`` validates a file
(``TokenFileError`` names the file and the field) into a ``TokenStore``, whose ``authenticate``
checks a presented token in constant time against every stored hash and re-reads the file when it
changed on disk (so added and revoked tokens take effect without a restart).

The store fails closed: while the file is missing, unreadable or invalid, ``authenticate`` raises
``TokenFileUnavailable`` for every token (the API answers 503) instead of keeping the tokens read
before, since a revocation may be exactly what broke it; a file that comes back valid is used again.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
TOKEN_PREFIX = "nm_"  # makes a leaked token recognizable (secret scanners, logs)
MAX_TOKEN_CHARS = 256  # longer presented tokens are refused without hashing
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
_HASH = re.compile(r"^[0-9a-f]{64}$")
_BAD_PATTERN = re.compile(r"[\x00-\x1f\x7f/\\]")
_DURATION = re.compile(r"^([1-9][0-9]{0,5})([hd])$")
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
MAX_PATTERN_CHARS = 200
RIGHTS = ("read", "add", "forget", "replace")
DEFAULT_RIGHTS = ("read",)


class TokenFileError(ValueError):
    """A token file (or a token to add) that is not valid; the message names the file and field."""


def hash_token(token: str) -> str:
    """Hex SHA-256 of ``token`` (what the file stores)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class TokenEntry:
    """One token of the file: its name, hash, the chat patterns it may use and its rights there."""

    name: str
    sha256: str
    chats: tuple[str, ...]
    created: str | None = None
    rights: tuple[str, ...] = DEFAULT_RIGHTS
    expires: str | None = None

    def expired(self, now: datetime | None = None) -> bool:
        """True from the token's ``expires`` time on (never without one)."""
        if self.expires is None:
            return False
        return (now or datetime.now(UTC)) >= datetime.strptime(self.expires, TIME_FORMAT).replace(tzinfo=UTC)

    def allows(self, chat: str, right: str = "read") -> bool:
        """True when the token has ``right`` and ``chat`` matches one of its patterns."""
        return right in self.rights and any(fnmatch.fnmatchcase(chat, pattern) for pattern in self.chats)

    def visible(self, chats: Iterable[str]) -> list[str]:
        """The chats of ``chats`` this token may read, in their order."""
        return [chat for chat in chats if self.allows(chat)]

    def to_json(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "name": self.name,
            "sha256": self.sha256,
            "chats": list(self.chats),
            "rights": list(self.rights),
        }
        if self.created is not None:
            row["created"] = self.created
        if self.expires is not None:
            row["expires"] = self.expires
        return row


def _check_name(name: Any, where: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise TokenFileError(
            f"{where}: name must be 1-64 characters (letters, digits, '._@-', starting with a "
            f"letter or digit), got {name!r}"
        )
    return name


def _check_patterns(chats: Any, where: str) -> tuple[str, ...]:
    if isinstance(chats, str) or not isinstance(chats, list | tuple) or not chats:
        raise TokenFileError(f"{where}: chats must be a non-empty list of chat keys or globs, got {chats!r}")
    for i, pattern in enumerate(chats):
        if not isinstance(pattern, str) or not pattern.strip() or len(pattern) > MAX_PATTERN_CHARS:
            raise TokenFileError(
                f"{where}[{i}]: must be a non-empty string of at most {MAX_PATTERN_CHARS} characters, got {pattern!r}"
            )
        if _BAD_PATTERN.search(pattern):
            raise TokenFileError(
                f"{where}[{i}]: must not contain path separators or control characters, got {pattern!r}"
            )
    return tuple(chats)


def _check_rights(rights: Any, where: str) -> tuple[str, ...]:
    if (
        isinstance(rights, str)
        or not isinstance(rights, list | tuple)
        or not rights
        or any(right not in RIGHTS for right in rights)
    ):
        raise TokenFileError(f"{where}: rights must be a non-empty list of {list(RIGHTS)}, got {rights!r}")
    return tuple(dict.fromkeys(rights))


def _check_expires(expires: Any, where: str) -> str | None:
    if expires is None:
        return None
    try:
        datetime.strptime(expires, TIME_FORMAT)
    except (TypeError, ValueError):
        raise TokenFileError(f"{where}: must be a UTC time like 2026-12-31T00:00:00Z, got {expires!r}") from None
    return expires


def expiry(text: str, now: datetime | None = None) -> str:
    """The ``expires`` value of ``token add --expires``: a duration from now (``12h``, ``30d``) or a
    UTC time (``2026-12-31T00:00:00Z``, or a date ``2026-12-31`` meaning its midnight)."""
    now = now or datetime.now(UTC)
    if match := _DURATION.match(text.strip()):
        amount, unit = int(match.group(1)), match.group(2)
        return (now + timedelta(hours=amount) if unit == "h" else now + timedelta(days=amount)).strftime(TIME_FORMAT)
    for pattern in (TIME_FORMAT, "%Y-%m-%d"):
        try:
            moment = datetime.strptime(text.strip(), pattern).replace(tzinfo=UTC)
        except ValueError:
            continue
        if moment <= now:
            raise TokenFileError(f"--expires {text!r} is in the past")
        return moment.strftime(TIME_FORMAT)
    raise TokenFileError(f"--expires must be a duration (12h, 30d) or a UTC time (2026-12-31T00:00:00Z), got {text!r}")


_FIELDS = ("name", "sha256", "chats", "created", "rights", "expires")


def _parse(path: Path, text: str) -> list[TokenEntry]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TokenFileError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise TokenFileError(f"{path}: must hold a JSON object with 'version' and 'tokens'")
    unknown = sorted(set(data) - {"version", "tokens"})
    if unknown:
        raise TokenFileError(f"{path}: unknown fields {unknown}; allowed: ['version', 'tokens']")
    if data.get("version") != FORMAT_VERSION:
        raise TokenFileError(f"{path}: version must be {FORMAT_VERSION}, got {data.get('version')!r}")
    rows = data.get("tokens")
    if not isinstance(rows, list):
        raise TokenFileError(f"{path}: tokens must be a list, got {type(rows).__name__}")
    entries: list[TokenEntry] = []
    names: set[str] = set()
    hashes: set[str] = set()
    for i, row in enumerate(rows):
        where = f"{path}: tokens[{i}]"
        if not isinstance(row, dict):
            raise TokenFileError(f"{where}: must be an object with name, sha256 and chats")
        unknown = sorted(set(row) - set(_FIELDS))
        if unknown:
            raise TokenFileError(f"{where}: unknown fields {unknown}; allowed: {list(_FIELDS)}")
        for key in ("name", "sha256", "chats"):
            if key not in row:
                raise TokenFileError(f"{where}.{key}: missing")
        name = _check_name(row["name"], f"{where}.name")
        digest = row["sha256"]
        if not isinstance(digest, str) or not _HASH.match(digest):
            raise TokenFileError(
                f"{where}.sha256: must be 64 lowercase hex digits (the SHA-256 of the token), not the token itself"
            )
        chats = _check_patterns(row["chats"], f"{where}.chats")
        created = row.get("created")
        if created is not None and not isinstance(created, str):
            raise TokenFileError(f"{where}.created: must be a string, got {created!r}")
        if name in names:
            raise TokenFileError(f"{where}.name: {name!r} is used by an earlier token")
        if digest in hashes:
            raise TokenFileError(f"{where}.sha256: the same token is stored twice")
        names.add(name)
        hashes.add(digest)
        rights = _check_rights(row.get("rights", list(DEFAULT_RIGHTS)), f"{where}.rights")
        entries.append(
            TokenEntry(name, digest, chats, created, rights, _check_expires(row.get("expires"), f"{where}.expires"))
        )
    return entries


def _read(path: Path) -> tuple[list[TokenEntry], tuple[int, ...]]:
    try:
        stamp = _stamp(path)
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TokenFileError(f"{path}: token file not found (create one with `narrative-mirror token add`)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenFileError(f"{path}: cannot be read: {exc}") from None
    return _parse(path, text), stamp


class TokenFileUnavailable(RuntimeError):
    """The token file is missing, unreadable or invalid right now: no token can be checked."""


def _stamp(path: Path) -> tuple[int, int, int, int]:
    """What changes when the file is replaced, edited or has its mode changed (ctime: chmod)."""
    stat = path.stat()
    return (stat.st_ino, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size)


class TokenStore:
    """The tokens of one file; thread-safe. Build it with ``load_tokens``."""

    def __init__(self, path: Path, entries: list[TokenEntry], stamp: tuple[int, ...] | None = None):
        self.path = path
        self._stamp = stamp
        # (tokens, why the file cannot be used now or None), swapped as one so readers see a consistent pair
        self._state: tuple[tuple[TokenEntry, ...], str | None] = (tuple(entries), None)
        self._lock = threading.Lock()

    @property
    def entries(self) -> tuple[TokenEntry, ...]:
        """The tokens of the file as it is now; none while it is missing, unreadable or invalid."""
        return self._current()[0]

    @property
    def problem(self) -> str | None:
        """Why the file cannot be used now, naming it; None when it can."""
        return self._current()[1]

    def _current(self) -> tuple[tuple[TokenEntry, ...], str | None]:
        """The state after re-reading the file if it changed on disk."""
        try:
            stamp: tuple[int, ...] | None = _stamp(self.path)
        except OSError as exc:
            stamp, gone = None, f"{self.path}: token file cannot be read: {exc.strerror or exc}"
        else:
            gone = None
        if stamp is not None and stamp == self._stamp:
            return self._state
        with self._lock:
            if stamp is not None and stamp == self._stamp:
                return self._state
            was_usable = self._state[1] is None
            if gone is None:
                try:
                    self._state = (tuple(_parse(self.path, self.path.read_text(encoding="utf-8"))), None)
                except TokenFileError as exc:
                    self._state = ((), str(exc))
                except (OSError, UnicodeDecodeError) as exc:
                    self._state = ((), f"{self.path}: token file cannot be read: {exc}")
            else:
                self._state = ((), gone)
            self._stamp = stamp
            entries, problem = self._state
            if problem is not None and was_usable:  # said once, not on every request
                log.error("%s; refusing every request until it is valid again", problem)
            elif problem is None:
                log.log(
                    logging.INFO if was_usable else logging.WARNING,
                    "token file %s %s: %d tokens",
                    self.path,
                    "re-read" if was_usable else "is valid again",
                    len(entries),
                )
            return self._state

    def authenticate(self, token: str | None) -> TokenEntry | None:
        """The entry of ``token``, or None (also once it has expired). Compares the token's hash
        with every stored hash in constant time (no early exit). ``TokenFileUnavailable`` while
        the file cannot be used: the tokens read before are not trusted (a revocation may be what
        broke the file)."""
        entries, problem = self._current()
        if problem is not None:
            raise TokenFileUnavailable(problem)
        if not token or len(token) > MAX_TOKEN_CHARS:
            return None
        presented = hash_token(token).encode()
        found: TokenEntry | None = None
        for entry in entries:
            if hmac.compare_digest(presented, entry.sha256.encode()):
                found = entry
        return None if found is None or found.expired() else found

    def by_name(self, name: str) -> TokenEntry | None:
        """The unexpired entry named ``name`` (a signed session names its token); None otherwise.
        ``TokenFileUnavailable`` as ``authenticate``."""
        entries, problem = self._current()
        if problem is not None:
            raise TokenFileUnavailable(problem)
        found = next((entry for entry in entries if entry.name == name), None)
        return None if found is None or found.expired() else found


def load_tokens(path: str | Path) -> TokenStore:
    """Read and validate a token file; ``TokenFileError`` names the file and field."""
    path = Path(path)
    entries, stamp = _read(path)
    return TokenStore(path, entries, stamp)


def _write(path: Path, entries: list[TokenEntry]) -> None:
    """Replace ``path`` atomically with ``entries`` (mode 0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"version": FORMAT_VERSION, "tokens": [e.to_json() for e in entries]}, indent=2) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def add_token(
    path: str | Path,
    name: str,
    chats: Iterable[str],
    rights: Iterable[str] = DEFAULT_RIGHTS,
    expires: str | None = None,
) -> str:
    """Add a token named ``name`` with ``rights`` (default read) in ``chats`` (keys or globs) to the
    file at ``path`` (created if missing) and return the token: it is shown only now, the file
    keeps its hash. ``expires``: UTC time it is refused from (``expiry``; None: never)."""
    path = Path(path)
    entries = _read(path)[0] if path.exists() else []
    _check_name(name, f"{path}: new token name")
    patterns = _check_patterns(chats if isinstance(chats, str) else list(chats), f"{path}: new token chats")
    granted = _check_rights(rights if isinstance(rights, str) else list(rights), f"{path}: new token rights")
    if any(entry.name == name for entry in entries):
        raise TokenFileError(f"{path}: a token named {name!r} exists already (remove it first)")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    created = datetime.now(UTC).strftime(TIME_FORMAT)
    until = _check_expires(expires, f"{path}: new token expires")
    _write(path, [*entries, TokenEntry(name, hash_token(token), patterns, created, granted, until)])
    return token


def remove_token(path: str | Path, name: str) -> bool:
    """Revoke the token named ``name``; False when there was none."""
    path = Path(path)
    entries = _read(path)[0]
    kept = [entry for entry in entries if entry.name != name]
    if len(kept) == len(entries):
        return False
    _write(path, kept)
    return True
