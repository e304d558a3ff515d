"""Catalog locks: serialize "check latest, create snapshot-N, update hints" across processes.

``SqlCatalogLock`` (and SQLAlchemy with it) is imported on first use, so importing lakecore
stays cheap for Spark executors and the command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lakecore.lock.base import CatalogLock, NoopLock
from lakecore.lock.options import LockOptions, lock_from_options, parse_lock_options

if TYPE_CHECKING:
    from lakecore.lock.sql import LockHolder, SqlCatalogLock

__all__ = [
    "CatalogLock",
    "LockHolder",
    "LockOptions",
    "NoopLock",
    "SqlCatalogLock",
    "lock_from_options",
    "parse_lock_options",
]


def __getattr__(name: str) -> Any:
    if name in ("SqlCatalogLock", "LockHolder"):
        from lakecore.lock import sql

        return getattr(sql, name)
    raise AttributeError(name)
