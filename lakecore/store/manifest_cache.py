"""Decoded manifests kept in memory, process-wide, least recently used first out.

A manifest file is never changed once written: Paimon names every one with a fresh UUID and
only ever deletes it (expiry, orphan clean-up). So its decoded entries can be kept by path, as
Paimon's own manifest cache does, and a writer that commits again and again, or a reader that
plans again and again, decodes each manifest once. A manifest this process writes goes in as it
is written, so the next commit's read of it costs nothing.

The cache holds at most ``MAX_ENTRIES`` manifest entries (about 1 KiB each with their
statistics), whole manifests at a time. ``clear`` empties it: a benchmark measuring a cold
start, or a test that damages a manifest on purpose, calls it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from lakecore.format.manifest import ManifestEntry

MAX_ENTRIES = 50_000

_lock = threading.Lock()
_cache: OrderedDict[str, tuple[ManifestEntry, ...]] = OrderedDict()
_held = 0


def get(key: str) -> tuple[ManifestEntry, ...] | None:
    """The entries of the manifest at ``key`` if they are held (it becomes the most recent)."""
    with _lock:
        entries = _cache.get(key)
        if entries is not None:
            _cache.move_to_end(key)
        return entries


def put(key: str, entries: Sequence[ManifestEntry]) -> None:
    """Hold the entries of the manifest at ``key``, dropping the least recent ones past the
    bound (a manifest bigger than the whole bound is not held)."""
    global _held
    held = tuple(entries)
    if len(held) > MAX_ENTRIES:
        return
    with _lock:
        old = _cache.pop(key, None)
        if old is not None:
            _held -= len(old)
        _cache[key] = held
        _held += len(held)
        while _held > MAX_ENTRIES:
            _, dropped = _cache.popitem(last=False)
            _held -= len(dropped)


def clear() -> None:
    """Forget every manifest."""
    global _held
    with _lock:
        _cache.clear()
        _held = 0


def size() -> int:
    """How many manifest entries are held."""
    with _lock:
        return _held
