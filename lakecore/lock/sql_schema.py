"""The lock table Paimon's JDBC catalog lock uses, and what differs per database: its DDL and
statements (Paimon's own), expiry as each dialect computes it, duplicate-key errors, SQLite's
connection settings. Plain facts for ``lakecore.lock.sql``.

Paimon (``JdbcUtils``, ``*DistributedLockDialect``) keeps one row per held lock in
``paimon_distributed_locks(lock_id VARCHAR(n) PK, acquired_at TIMESTAMP DEFAULT
CURRENT_TIMESTAMP, expire_time_seconds BIGINT DEFAULT 0)``: acquire inserts
``(lock_id, expire_time_seconds)``, release deletes by ``lock_id``, and every acquire first
deletes the row if ``now - acquired_at > expire_time_seconds`` on the database's clock.
lakecore adds one nullable column, ``lock_owner VARCHAR(36)``, which Paimon's statements never
name (they list their columns), so that its own release deletes only its own row.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import BigInteger, Column, DateTime, MetaData, String, Table

TABLE_NAME = "paimon_distributed_locks"  # JdbcUtils.DISTRIBUTED_LOCKS_TABLE_NAME
OWNER_COLUMN = "lock_owner"
OWNER_MAX_LENGTH = 36
LOCK_ID_MAX_LENGTH = 255  # Paimon's lock-key-max-length default; fits a MySQL utf8mb4 key
LEGACY_TABLE_NAME = "lakecore_catalog_locks"  # lakecore's own table before it shared Paimon's

_metadata = MetaData()
# For queries and tests; the table itself is created with Paimon's DDL (``create_table_sql``).
LOCKS = Table(
    TABLE_NAME,
    _metadata,
    Column("lock_id", String(LOCK_ID_MAX_LENGTH), primary_key=True),
    Column("acquired_at", DateTime, nullable=False),
    Column("expire_time_seconds", BigInteger, nullable=False),
    Column(OWNER_COLUMN, String(OWNER_MAX_LENGTH)),
)
LEGACY_LOCKS = Table(
    LEGACY_TABLE_NAME,
    _metadata,
    Column("lock_id", String(LOCK_ID_MAX_LENGTH), primary_key=True),
    Column("owner", String(255), nullable=False),
    Column("acquired_at", BigInteger, nullable=False),  # epoch millis, database clock
    Column("expire_seconds", BigInteger, nullable=False),
)


def create_table_sql(lock_id_max_length: int) -> str:
    """Paimon's CREATE TABLE (the same text for SQLite, MySQL and PostgreSQL), plus
    ``lock_owner``."""
    return (f"CREATE TABLE {TABLE_NAME}(lock_id VARCHAR({lock_id_max_length}) NOT NULL,"
            "acquired_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL,"
            "expire_time_seconds BIGINT DEFAULT 0 NOT NULL,"
            f"{OWNER_COLUMN} VARCHAR({OWNER_MAX_LENGTH}),"
            "PRIMARY KEY (lock_id))")


ADD_OWNER_SQL = f"ALTER TABLE {TABLE_NAME} ADD COLUMN {OWNER_COLUMN} VARCHAR({OWNER_MAX_LENGTH})"

# Seconds since acquired_at, exactly as Paimon's getTryReleaseTimedOutLock compares them.
ELAPSED_SECONDS = {
    "postgresql": "EXTRACT(EPOCH FROM AGE(NOW(), acquired_at))",
    "mysql": "TIMESTAMPDIFF(SECOND, acquired_at, NOW())",
    "mariadb": "TIMESTAMPDIFF(SECOND, acquired_at, NOW())",
    "sqlite": "strftime('%s', 'now') - strftime('%s', acquired_at)",
}

# acquired_at as epoch milliseconds (UTC), read the way the dialect's expiry reads it.
ACQUIRED_MS = {
    "postgresql": "CAST(EXTRACT(EPOCH FROM CAST(acquired_at AS TIMESTAMPTZ)) * 1000 AS BIGINT)",
    "mysql": "CAST(UNIX_TIMESTAMP(acquired_at) * 1000 AS SIGNED)",
    "mariadb": "CAST(UNIX_TIMESTAMP(acquired_at) * 1000 AS SIGNED)",
    "sqlite": "CAST(strftime('%s', acquired_at) AS INTEGER) * 1000",
}

# "now" in epoch milliseconds on the database server (the legacy table stores those).
NOW_MS = {
    "postgresql": "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
    # UTC_TIMESTAMP does not depend on the session time zone (no DST fold).
    "mysql": "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)",
    "mariadb": "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)",
    "sqlite": "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
}


@dataclass(frozen=True)
class Statements:
    """The lock's statements for one dialect (named parameters :lock_id, :expire, :owner)."""

    acquire: str
    release: str
    release_timed_out: str
    holder: str


def statements(dialect: str) -> Statements:
    elapsed = ELAPSED_SECONDS[dialect]
    expired = f"{elapsed} > expire_time_seconds"  # Paimon's strict comparison
    return Statements(
        # Paimon's getLockAcquireSql, plus our owner token
        acquire=(f"INSERT INTO {TABLE_NAME} (lock_id,expire_time_seconds,{OWNER_COLUMN}) "
                 "VALUES (:lock_id,:expire,:owner)"),
        # Paimon's getReleaseLockSql deletes by lock_id; ours only deletes our own row
        release=f"DELETE FROM {TABLE_NAME} WHERE lock_id = :lock_id AND {OWNER_COLUMN} = :owner",
        # Paimon's getTryReleaseTimedOutLock
        release_timed_out=f"DELETE FROM {TABLE_NAME} WHERE {expired} and lock_id = :lock_id",
        holder=(f"SELECT {OWNER_COLUMN} AS owner, expire_time_seconds, {ACQUIRED_MS[dialect]} "
                f"AS acquired_ms, CASE WHEN {expired} THEN 1 ELSE 0 END AS expired "
                f"FROM {TABLE_NAME} WHERE lock_id = :lock_id"),
    )


def expire_seconds(timeout: timedelta) -> int:
    """The ``expire_time_seconds`` Paimon stores for an acquire timeout: the timeout in whole
    milliseconds, integer-divided by 1000 (``timeoutMillSeconds / 1000`` in Java: 8 min ->
    480, 2.5 s -> 2, 999 ms -> 0)."""
    millis = timeout // timedelta(milliseconds=1)
    return int(millis // 1000)


@dataclass(frozen=True)
class LockHolder:
    """Who holds a lock: its row, plus whether it is stale by the database's clock.

    ``owner`` is None for a row without an owner token (Java Paimon's JDBC lock)."""

    lock_id: str
    owner: str | None
    acquired_at: datetime
    expire_seconds: int
    stale: bool

    @property
    def expires_at(self) -> datetime:
        return self.acquired_at + timedelta(seconds=self.expire_seconds)

    @property
    def who(self) -> str:
        return self.owner if self.owner is not None else "a writer without an owner token " \
            "(Java Paimon's JDBC catalog lock)"


def utc_millis(millis: int) -> datetime:
    return datetime.fromtimestamp(millis / 1000, tz=UTC)


def sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # WAL + synchronous=NORMAL: a commit survives any process crash and costs no fsync; only
    # an OS crash can drop the newest rows, and then every process holding them died too (an
    # SQLite lock only ever serves one machine).
    # Journal mode is persistent: once the file is in WAL mode (the usual case) it is only
    # read. Switching needs a lock the busy handler does not wait for, so several processes
    # opening a fresh lock database at once retry it briefly ("database is locked").
    cur = dbapi_conn.cursor()
    try:
        deadline = time.monotonic() + 10.0
        while True:
            try:
                if str(cur.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                    cur.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        cur.execute("PRAGMA synchronous=NORMAL")
    finally:
        cur.close()
