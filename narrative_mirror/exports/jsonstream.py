"""Streaming JSON (ijson) in time linear in the input, long strings included.

ijson's C backend (yajl) lexes a token again from its start each time more input arrives while
the token is unfinished, so a string spanning k reads of 64 KiB costs k times its length: a
40 MB message text took 35 s. Here the reads double in size while nothing has come out since
the last read (one token or item still open), and fall back to the base size once something has:
a long string is lexed about twice, whatever its length, and ordinary files are read in small
reads as before. Memory: the open token itself plus at most its size again in the last read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

import ijson

BASE_READ = 64 * 1024


class _GrowingReads:
    """A binary file whose reads double while the parser has produced nothing since the last."""

    def __init__(self, handle: IO[bytes]):
        self._handle = handle
        self._size = BASE_READ
        self.produced = True

    def read(self, size: int = -1) -> bytes:
        if size == 0:
            return b""
        self._size = BASE_READ if self.produced else self._size * 2
        self.produced = False
        return self._handle.read(self._size)


def _stream(handle: IO[bytes], make) -> Iterator[Any]:
    reads = _GrowingReads(handle)
    for value in make(reads):
        reads.produced = True
        yield value


def parse(handle: IO[bytes]) -> Iterator[tuple[str, str, Any]]:
    """``ijson.parse``: (prefix, event, value) triples."""
    return _stream(handle, ijson.parse)


def items(handle: IO[bytes], prefix: str) -> Iterator[Any]:
    """``ijson.items``: every value at ``prefix`` (``messages.item``), built one at a time."""
    return _stream(handle, lambda reads: ijson.items(reads, prefix))
