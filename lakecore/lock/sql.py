"""``SqlCatalogLock``: Paimon's JDBC catalog lock, on SQLAlchemy, in the Airflow metadata DB.

It uses Paimon's own table, lock id and statements (``lakecore.lock.sql_schema``), so a Java
Paimon writer with the JDBC catalog lock and lakecore exclude each other on one warehouse:

* lock id ``<catalog-key>.<database>.<table>``; one row per held lock in
  ``paimon_distributed_locks``, whose primary key does the excluding.
* acquire = Paimon's INSERT of ``(lock_id, expire_time_seconds)`` plus our owner token;
  ``expire_time_seconds`` is the timeout in milliseconds integer-divided by 1000, as Paimon
  stores it. Contention is a refused insert with a row under the lock id, on every driver
  (``lakecore.lock.drivers``); every other database error propagates.
* a row older than its ``expire_time_seconds`` on the database's clock (Paimon's comparison,
  per dialect) is deleted by the next acquirer, whoever inserted it.
* release = DELETE by lock id *and* ``lock_owner``, in ``finally``: a holder never deletes a
  row another owner inserted after taking over (Paimon's own release deletes by lock id).
* waiting is capped exponential backoff (with jitter) up to ``lock-acquire-timeout``; the
  timeout error names the holder and since when.
* the table lakecore used before, ``lakecore_catalog_locks``, is read once on first use: a lock
  still held there is honoured until it is released or expires.

Connections are validated on checkout (``pool_pre_ping``), so a pooled connection the server
dropped is replaced instead of failing a commit. SQLite (own file, busy timeout), PostgreSQL
and MySQL/MariaDB are supported.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import URL, Connection, CursorResult, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError

from lakecore.errors import CatalogLockError, CatalogLockTimeoutError
from lakecore.lock.base import DEFAULT_ACQUIRE_TIMEOUT, DEFAULT_CHECK_MAX_SLEEP
from lakecore.lock.drivers import connect_args, unsupported
from lakecore.lock.sql_schema import (
    ADD_OWNER_SQL,
    LEGACY_TABLE_NAME,
    LOCK_ID_MAX_LENGTH,
    LOCKS,
    NOW_MS,
    OWNER_COLUMN,
    OWNER_MAX_LENGTH,
    TABLE_NAME,
    LockHolder,
    create_table_sql,
    expire_seconds,
    sqlite_pragmas,
    statements,
    utc_millis,
)

__all__ = ["LOCKS", "TABLE_NAME", "LockHolder", "SqlCatalogLock"]

log = logging.getLogger(__name__)
T = TypeVar("T")

MIN_SLEEP_SECONDS = 0.01
HOLDER_CHECK_SECONDS = 1.0
SQLITE_BUSY_TIMEOUT_SECONDS = 30.0
CONNECT_TIMEOUT_SECONDS = 10
_ATTEMPTS = 3  # tries of one insert on a connection the server dropped
# tries of one insert refused with no row behind it (a holder that released between our
# insert and our look, or a refusal that is not contention), the first few immediate,
# then backing off from MIN_SLEEP_SECONDS: 4 processes committing back to back on
# MariaDB saw three such refusals in a row; a refusal that is not contention still
# raises within about a second
_REFUSED_TRIES = 8
_REFUSED_AT_ONCE = 2

_held = threading.local()


def _invalidated(err: BaseException) -> bool:
    return isinstance(err, DBAPIError) and bool(err.connection_invalidated)


class _Connection:
    """One pooled connection reused by the statements of one acquire/release cycle (one
    pre-ping instead of one per statement); a connection the server dropped is swapped for a
    fresh, validated one on next use."""

    def __init__(self, lock: SqlCatalogLock) -> None:
        self._lock = lock
        self._conn: Connection | None = None

    def execute(self, stmt: Any, params: dict[str, Any]) -> CursorResult[Any]:
        conn = self._conn
        if conn is None or conn.invalidated or conn.closed:
            self.close()
            conn = self._conn = self._lock.connect()
        return conn.execute(stmt, params)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class SqlCatalogLock:
    """A catalog lock in a SQL database (``lock.type=jdbc``). Thread- and fork-safe."""

    def __init__(
        self,
        url: str | URL,
        catalog_key: str = "jdbc",
        acquire_timeout: timedelta = DEFAULT_ACQUIRE_TIMEOUT,
        check_max_sleep: timedelta = DEFAULT_CHECK_MAX_SLEEP,
        expire: timedelta | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        engine_options: dict[str, Any] | None = None,
        lock_id_max_length: int = LOCK_ID_MAX_LENGTH,
    ) -> None:
        from sqlalchemy.engine import make_url

        self.url = make_url(url)
        self.dialect = self.url.get_backend_name()
        why = unsupported(self.url)
        if why is not None:
            raise CatalogLockError(why)
        if self.dialect == "sqlite" and self.url.database in (None, "", ":memory:"):
            raise CatalogLockError(
                "an in-memory SQLite database cannot be shared between processes: "
                "give the catalog lock a file (sqlite:////path/to/lakecore-locks.db)"
            )
        self.catalog_key = catalog_key
        self.acquire_timeout = acquire_timeout
        self.check_max_sleep = check_max_sleep
        self.lock_id_max_length = lock_id_max_length
        # Paimon's JDBC lock stores the acquire timeout as the row's expiry; so do we by default.
        self.expire = expire if expire is not None else acquire_timeout
        self.expire_seconds = expire_seconds(self.expire)  # rounded as Paimon rounds it
        self.clock, self.sleep = clock, sleep
        self.rng = rng or random.Random()
        self.engine_options = dict(engine_options or {})
        sql = statements(self.dialect)
        self._insert = text(sql.acquire)
        self._select = text(sql.holder)
        self._delete = text(sql.release)
        self._delete_expired = text(sql.release_timed_out)
        now_ms = NOW_MS[self.dialect]
        self._legacy_scan = text(
            f"SELECT lock_id, owner FROM {LEGACY_TABLE_NAME} "
            f"WHERE acquired_at + expire_seconds * 1000 >= {now_ms}")
        self._legacy_select = text(
            f"SELECT owner, acquired_at, expire_seconds FROM {LEGACY_TABLE_NAME} "
            f"WHERE lock_id = :lock_id AND owner = :owner "
            f"AND acquired_at + expire_seconds * 1000 >= {now_ms}")
        self._legacy: dict[str, str] = {}  # lock id -> owner, still held in the old table
        self._engine_obj: Engine | None = None
        self._engine_pid = 0
        self._table_ready = False
        self._init_lock = threading.Lock()

    # -- plumbing ------------------------------------------------------------------------
    def __repr__(self) -> str:
        url = self.url.render_as_string(hide_password=True)
        return f"SqlCatalogLock({url!r}, catalog_key={self.catalog_key!r})"

    def __getstate__(self) -> dict[str, Any]:
        """Picklable (e.g. shipped to Spark executors inside a table): no engine, no mutex."""
        state = self.__dict__.copy()
        state.update(_engine_obj=None, _engine_pid=0, _init_lock=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_lock = threading.Lock()

    def _create_engine(self) -> Engine:
        opts: dict[str, Any] = {"pool_pre_ping": True}
        if self.dialect == "sqlite":
            opts["connect_args"] = {"timeout": SQLITE_BUSY_TIMEOUT_SECONDS}
        else:
            opts.update(pool_size=2, max_overflow=8, pool_recycle=1800,
                        connect_args=connect_args(self.url, CONNECT_TIMEOUT_SECONDS))
        opts.update(self.engine_options)
        engine = create_engine(self.url, **opts)
        if self.dialect == "sqlite":
            event.listen(engine, "connect", sqlite_pragmas)
        return engine

    def engine(self) -> Engine:
        """The engine, created on first use (and again in a forked child); lock table ensured."""
        eng, pid = self._engine_obj, os.getpid()
        if eng is not None and self._engine_pid == pid and self._table_ready:
            return eng
        with self._init_lock:
            if self._engine_obj is not None and self._engine_pid != pid:
                # forked: the parent's pooled sockets are not ours to use or to close
                self._engine_obj.dispose(close=False)
                self._engine_obj = None
            if self._engine_obj is None:
                self._engine_obj, self._engine_pid = self._create_engine(), pid
            if not self._table_ready:
                self._ensure_table(self._engine_obj)
                self._table_ready = True
            return self._engine_obj

    def connect(self) -> Connection:
        """A validated connection in autocommit mode: every statement here is a transaction
        of its own, so BEGIN/COMMIT round trips would only add latency."""
        return self.engine().connect().execution_options(isolation_level="AUTOCOMMIT")

    def _ensure_table(self, engine: Engine) -> None:
        """Paimon's CREATE TABLE if missing, ``lock_owner`` added if the table lacks it (a
        concurrent creator winning either race is fine), then the old table read once."""
        if not inspect(engine).has_table(TABLE_NAME):
            try:
                with engine.begin() as conn:
                    conn.execute(text(create_table_sql(self.lock_id_max_length)))
            except DBAPIError:
                if not inspect(engine).has_table(TABLE_NAME):
                    raise
        if not self._has_owner_column(engine):
            try:
                with engine.begin() as conn:
                    conn.execute(text(ADD_OWNER_SQL))
            except DBAPIError as e:
                if not self._has_owner_column(engine):
                    raise CatalogLockError(
                        f"the lock table {TABLE_NAME} has no {OWNER_COLUMN} column and adding "
                        f"it failed ({type(e.orig).__name__}); run once: {ADD_OWNER_SQL}"
                    ) from e
        self._legacy = self._read_legacy(engine)

    @staticmethod
    def _has_owner_column(engine: Engine) -> bool:
        return any(str(c["name"]).lower() == OWNER_COLUMN
                   for c in inspect(engine).get_columns(TABLE_NAME))

    def _read_legacy(self, engine: Engine) -> dict[str, str]:
        """The locks still held in ``lakecore_catalog_locks`` (read once, on first use)."""
        if not inspect(engine).has_table(LEGACY_TABLE_NAME):
            return {}
        with engine.connect() as conn:
            rows = conn.execute(self._legacy_scan).all()
        if rows:
            log.warning("%d catalog lock(s) still held in the old table %s are honoured "
                        "until released or expired: %s", len(rows), LEGACY_TABLE_NAME,
                        ", ".join(str(r.lock_id) for r in rows))
        return {str(r.lock_id): str(r.owner) for r in rows}

    def close(self) -> None:
        with self._init_lock:
            if self._engine_obj is not None and self._engine_pid == os.getpid():
                self._engine_obj.dispose()
            self._engine_obj = None

    # -- the lock ------------------------------------------------------------------------
    def lock_id(self, database: str, table: str) -> str:
        """Paimon's lock id: ``<catalog-key>.<database>.<table>``."""
        lock_id = f"{self.catalog_key}.{database}.{table}"
        if len(lock_id) > self.lock_id_max_length:
            raise CatalogLockError(
                f"catalog lock id {lock_id[:60]!r}... is {len(lock_id)} characters; "
                f"the lock table allows {self.lock_id_max_length} (lock-key-max-length)"
            )
        return lock_id

    @staticmethod
    def new_owner() -> str:
        """A token unique to one acquisition (48 random bits) that still tells a human where
        it runs: ``<host>/pid=<pid>/<random>``, at most 36 characters (``lock_owner``)."""
        tail = f"/pid={os.getpid()}/{uuid.uuid4().hex[:12]}"
        return socket.gethostname()[: OWNER_MAX_LENGTH - len(tail)] + tail

    def run_with_lock(self, database: str, table: str, fn: Callable[[], T]) -> T:
        lock_id = self.lock_id(database, table)
        held: set[str] = _held.__dict__.setdefault("ids", set())
        if lock_id in held:
            raise CatalogLockError(f"catalog lock {lock_id!r} is not re-entrant")
        owner = self.new_owner()
        conn = _Connection(self)
        try:
            self.acquire(lock_id, owner, conn)
            held.add(lock_id)
            started = self.clock()
            try:
                return fn()
            finally:
                held.discard(lock_id)
                took = self.clock() - started
                if took > self.expire_seconds:
                    log.error("held catalog lock %s for %.1f s, longer than its expiry of "
                              "%s s: another committer may have taken it over", lock_id, took,
                              self.expire_seconds)
                self.release(lock_id, owner, conn)
        finally:
            conn.close()

    def acquire(self, lock_id: str, owner: str, conn: _Connection | None = None) -> None:
        """Insert the row, waiting with capped exponential backoff; raise on timeout.

        After a lost insert the holder's row is read (is it stale? who is it?) on the first
        loss, then at most every ``HOLDER_CHECK_SECONDS`` and at the deadline, so waiters
        add little load to the metadata database.
        """
        if conn is None:
            conn = _Connection(self)
            try:
                return self.acquire(lock_id, owner, conn)
            finally:
                conn.close()
        self.engine()  # the table, and what the old table holds
        start = self.clock()
        deadline = start + self.acquire_timeout.total_seconds()
        cap = max(MIN_SLEEP_SECONDS, self.check_max_sleep.total_seconds())
        backoff = MIN_SLEEP_SECONDS
        holder: LockHolder | None = None
        looked_at: float | None = None
        while True:
            legacy = self._legacy_holder(conn, lock_id) if self._legacy else None
            if legacy is None and self._try_insert(conn, lock_id, owner):
                return
            now = self.clock()
            if legacy is not None:
                holder = legacy
            elif looked_at is None or now - looked_at >= HOLDER_CHECK_SECONDS or now >= deadline:
                looked_at = now
                current = self._holder(conn, lock_id)
                if current is not None and current.stale:
                    if self._delete_stale(conn, current):
                        log.warning("took over stale catalog lock %s from %s (acquired %s, "
                                    "expired %s)", lock_id, current.who,
                                    current.acquired_at.isoformat(),
                                    current.expires_at.isoformat())
                    continue  # retry the insert at once
                if current is None and now < deadline:
                    continue  # released between our insert and our look: try again at once
                holder = current or holder
            if now >= deadline:
                raise CatalogLockTimeoutError(
                    lock_id, now - start,
                    holder.who if holder else None,
                    holder.acquired_at if holder else None,
                    holder.expires_at if holder else None,
                )
            conn.close()  # back to the pool while we wait; re-validated on next use
            wait = min(backoff, deadline - now)
            self._pause(wait)
            backoff = min(cap, backoff * 2)

    def _pause(self, seconds: float) -> None:
        """Sleep ``seconds``, randomized down to half (waiters do not retry in step)."""
        self.sleep(seconds * (0.5 + self.rng.random() / 2))

    def _try_insert(self, conn: _Connection, lock_id: str, owner: str) -> bool:
        """Insert our row: True if it landed, False if another owner holds ``lock_id``.

        Contention is recognised the same way on every driver: the insert is refused
        (IntegrityError, the DB-API's class for SQLSTATE class 23) *and* a row for
        ``lock_id`` exists when we look. Drivers spell the duplicate-key code each their own
        way (psycopg's ``sqlstate``, psycopg2's ``pgcode``, pg8000's ``args[0]["C"]``, MySQL's
        1062), so none of them is read. A refusal with no row behind it is either a holder
        that released in between (the insert is tried again: at once, then after growing
        pauses, as the lock can change hands between our insert and our look several times
        in a row) or not contention at all (a NOT NULL or malformed table), which is raised
        after ``_REFUSED_TRIES`` tries, within about a second."""
        params = {"lock_id": lock_id, "owner": owner, "expire": self.expire_seconds}
        dropped = refused = 0
        while True:
            try:
                conn.execute(self._insert, params)
                return True
            except IntegrityError:
                if self._holder(conn, lock_id) is not None:
                    return False
                refused += 1
                if refused >= _REFUSED_TRIES:
                    raise
                if refused > _REFUSED_AT_ONCE:
                    pause = MIN_SLEEP_SECONDS * 2 ** (refused - _REFUSED_AT_ONCE - 1)
                    self._pause(pause)
            except DBAPIError as e:
                # The server dropped the connection mid-statement: the insert may have landed.
                # Our owner token is unique, so the row tells us; otherwise try again.
                dropped += 1
                if not _invalidated(e) or dropped >= _ATTEMPTS:
                    raise
                held = self._holder(conn, lock_id)
                if held is not None:
                    return held.owner == owner

    def _legacy_holder(self, conn: _Connection, lock_id: str) -> LockHolder | None:
        """The old table's holder of ``lock_id`` while its row is live, else None (and the
        old table is not asked about ``lock_id`` again)."""
        owner = self._legacy.get(lock_id)
        if owner is None:
            return None
        row = conn.execute(self._legacy_select, {"lock_id": lock_id, "owner": owner}).first()
        if row is None:
            self._legacy.pop(lock_id, None)
            return None
        return LockHolder(lock_id, f"{row.owner} (in {LEGACY_TABLE_NAME})",
                          utc_millis(int(row.acquired_at)), int(row.expire_seconds), False)

    def _holder(self, conn: _Connection, lock_id: str) -> LockHolder | None:
        row = conn.execute(self._select, {"lock_id": lock_id}).first()
        if row is None:
            return None
        return LockHolder(lock_id, row.owner, utc_millis(int(row.acquired_ms)),
                          int(row.expire_time_seconds), stale=bool(row.expired))

    def _delete_stale(self, conn: _Connection, stale: LockHolder) -> bool:
        """Paimon's timed-out release: delete the row if it is (still) expired, whoever
        inserted it; a fresh row that replaced ``stale`` meanwhile is left alone."""
        return bool(conn.execute(self._delete_expired, {"lock_id": stale.lock_id}).rowcount)

    def release(self, lock_id: str, owner: str, conn: _Connection | None = None) -> None:
        """Delete our row. Never raises: the guarded action already happened (a commit's
        snapshot may exist), and failing here must not make the caller undo it."""
        if conn is None:
            conn = _Connection(self)
            try:
                return self.release(lock_id, owner, conn)
            finally:
                conn.close()
        for attempt in range(3):
            try:
                deleted = conn.execute(self._delete, {"lock_id": lock_id, "owner": owner}).rowcount
                if not deleted:
                    self._log_lost(conn, lock_id, owner)
                return
            except DBAPIError as e:
                if _invalidated(e) and attempt < 2:
                    continue
                log.exception("could not release catalog lock %s held by %s; it expires "
                              "after %s s", lock_id, owner, self.expire_seconds)
                return

    def _log_lost(self, conn: _Connection, lock_id: str, owner: str) -> None:
        """Our row was gone at release: say who holds the lock now, if anyone. No row at all
        is what Java Paimon's release leaves (it deletes by lock id alone, so a Java holder
        that outlived its expiry deletes the row of whoever took over)."""
        try:
            now = self._holder(conn, lock_id)
        except DBAPIError:
            now = None
        if now is not None:
            log.error("catalog lock %s was no longer held by %s at release: it was taken over "
                      "after its expiry by %s", lock_id, owner, now.who)
        else:
            log.error("catalog lock %s was no longer held by %s at release: its row was "
                      "deleted while held (taken over after its expiry and released since, or "
                      "deleted by a Java Paimon writer's release, which deletes by lock id "
                      "alone)", lock_id, owner)

    def holder(self, database: str, table: str) -> LockHolder | None:
        """Who holds the table's lock now (for ``lakecore inspect``), or None."""
        conn = _Connection(self)
        try:
            return self._holder(conn, self.lock_id(database, table))
        finally:
            conn.close()
