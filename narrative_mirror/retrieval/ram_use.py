"""Memory of the in-memory chat indexes: how much one holds (estimated), and handing what a load
or an eviction freed back to the system."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import itertools
import sys
from collections.abc import Sequence

import numpy as np


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim`` (None elsewhere): hands freed heap memory back to the system."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):
        return None


def release_free_memory() -> None:
    """Return memory freed by a chat load or eviction to the system: a load's temporaries
    (~230 MB for 44,720 messages) otherwise stay in the allocators' free lists and in RSS."""
    try:
        import pyarrow

        pyarrow.default_memory_pool().release_unused()
    except Exception:  # noqa: BLE001 - an optimization only
        pass
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


# Searches between two hand-backs: a serving process's live objects stay the same search after
# search, but glibc's free lists keep growing its RSS (60 MB over 4,000 searches, all of it
# returned by a trim); one trim costs milliseconds.
TRIM_EVERY = 500
_searches = itertools.count(1)


def after_search() -> None:
    """Counts a search; every ``TRIM_EVERY``-th one hands freed memory back to the system."""
    if next(_searches) % TRIM_EVERY == 0:
        release_free_memory()


def counted_search(method):
    """``method`` with :func:`after_search` after each call."""

    @functools.wraps(method)
    def counted(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        finally:
            after_search()

    return counted


def _items_size(items: Sequence) -> int:
    """Bytes of the objects in ``items``: exact up to 2,000 of them, else from every k-th one."""
    if len(items) <= 2000:
        return sum(map(sys.getsizeof, items))
    step = len(items) // 1000
    return int(sum(map(sys.getsizeof, items[::step])) * len(items) / len(range(0, len(items), step)))


def deep_size(value, depth: int = 1) -> int:
    """Bytes of ``value`` and, ``depth`` levels down, of what its lists / dict values hold
    (dict keys are the chat's id strings, counted in their lists)."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, list | tuple):
        if depth <= 0:
            return sys.getsizeof(value)
        return sys.getsizeof(value) + (
            _items_size(value) if depth == 1 else sum(deep_size(v, depth - 1) for v in value)
        )
    if isinstance(value, dict):
        values = list(value.values())
        return sys.getsizeof(value) + (
            _items_size(values) if depth == 1 else sum(deep_size(v, depth - 1) for v in values)
        )
    return sys.getsizeof(value)
