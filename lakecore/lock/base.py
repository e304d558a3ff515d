"""The catalog lock contract the commit path relies on, and the lock-free implementation."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Protocol, TypeVar, runtime_checkable

T = TypeVar("T")

DEFAULT_ACQUIRE_TIMEOUT = timedelta(minutes=8)  # Paimon's lock-acquire-timeout
DEFAULT_CHECK_MAX_SLEEP = timedelta(seconds=8)  # Paimon's lock-check-max-sleep


@runtime_checkable
class CatalogLock(Protocol):
    """Runs ``fn`` while no other holder of the same (catalog key, database, table) runs.

    The commit path calls it around "check latest, create snapshot-N, update hints" only, so
    the section is short; data and manifest files are written before it is entered.
    """

    def run_with_lock(self, database: str, table: str, fn: Callable[[], T]) -> T: ...


class NoopLock:
    """No cross-process exclusion: right where ``FileIO.try_create`` is atomic (local files)."""

    def run_with_lock(self, database: str, table: str, fn: Callable[[], T]) -> T:
        return fn()

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return "NoopLock()"
