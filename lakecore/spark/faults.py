"""Pause points for the crash tests (fault injection): with
``LAKECORE_SPARK_PAUSE_AT=<point>`` a job stops at that point, touches the file named by
``LAKECORE_SPARK_PAUSE_MARKER`` and sleeps, so a test can SIGKILL it exactly there.
Unset (always, outside tests) they cost one environment lookup.

Points: ``write`` (an executor task, after its data files are written), ``commit`` (the
driver, inside the commit after the manifests are written, before ``snapshot-N`` is created).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

from lakecore.lock.base import CatalogLock
from lakecore.table import FileStoreTable

PAUSE_AT_ENV = "LAKECORE_SPARK_PAUSE_AT"
MARKER_ENV = "LAKECORE_SPARK_PAUSE_MARKER"
_PAUSE_SECONDS = 3600.0

T = TypeVar("T")


def pause_point(name: str) -> None:
    if os.environ.get(PAUSE_AT_ENV) != name:
        return
    marker = os.environ.get(MARKER_ENV)
    if marker:
        with open(marker, "a") as f:
            f.write(f"{name} {os.getpid()}\n")
    time.sleep(_PAUSE_SECONDS)


class _PauseBeforePublish:
    """Wraps the table's lock so the commit pauses just before it creates the snapshot."""

    def __init__(self, inner: CatalogLock | None) -> None:
        self.inner = inner

    def run_with_lock(self, database: str, table: str, fn: Callable[[], T]) -> T:
        pause_point("commit")  # manifests are written; the lock is not held yet
        if self.inner is None:
            return fn()
        return self.inner.run_with_lock(database, table, fn)


def instrument_commit(table: FileStoreTable) -> FileStoreTable:
    """The same table, with the ``commit`` pause point armed when the environment asks."""
    if os.environ.get(PAUSE_AT_ENV) == "commit":
        table.lock = _PauseBeforePublish(table.lock)
    return table
