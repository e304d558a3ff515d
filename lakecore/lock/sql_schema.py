"""The lock table and what differs per database: "now" on the server, duplicate-key errors,
SQLite's connection settings. Plain facts for ``lakecore.lock.sql``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import BigInteger, Column, MetaData, String, Table
from sqlalchemy.exc import IntegrityError

TABLE_NAME = "lakecore_catalog_locks"
LOCK_ID_MAX_LENGTH = 255  # Paimon's lock-key-max-length default; fits a MySQL utf8mb4 key

_metadata = MetaData()
LOCKS = Table(
    TABLE_NAME,
    _metadata,
    Column("lock_id", String(LOCK_ID_MAX_LENGTH), primary_key=True),
    Column("owner", String(255), nullable=False),
    Column("acquired_at", BigInteger, nullable=False),  # epoch millis, database clock
    Column("expire_seconds", BigInteger, nullable=False),
)

# "now" in epoch milliseconds on the database server, per dialect.
NOW_MS = {
    "postgresql": "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
    # UTC_TIMESTAMP does not depend on the session time zone (no DST fold).
    "mysql": "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)",
    "mariadb": "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)",
    "sqlite": "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
}

@dataclass(frozen=True)
class LockHolder:
    """Who holds a lock: its row, plus whether it is stale by the database's clock."""

    lock_id: str
    owner: str
    acquired_at: datetime
    expire_seconds: int
    stale: bool

    @property
    def expires_at(self) -> datetime:
        return self.acquired_at + timedelta(seconds=self.expire_seconds)


def utc_millis(millis: int) -> datetime:
    return datetime.fromtimestamp(millis / 1000, tz=UTC)


def is_duplicate_key(dialect: str, err: IntegrityError) -> bool:
    """Whether ``err`` is a primary-key violation (the only contention signal)."""
    orig = err.orig
    if dialect == "postgresql":
        return getattr(orig, "sqlstate", None) == "23505"  # unique_violation
    if dialect in ("mysql", "mariadb"):
        args: tuple[Any, ...] = getattr(orig, "args", ())
        return len(args) > 0 and args[0] == 1062  # ER_DUP_ENTRY
    name = getattr(orig, "sqlite_errorname", None)
    if name is not None:
        return name in ("SQLITE_CONSTRAINT_PRIMARYKEY", "SQLITE_CONSTRAINT_UNIQUE")
    return "UNIQUE constraint failed" in str(orig)


def sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # WAL + synchronous=NORMAL: a commit survives any process crash and costs no fsync; only
    # an OS crash can drop the newest rows, and then every process holding them died too (an
    # SQLite lock only ever serves one machine).
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()
