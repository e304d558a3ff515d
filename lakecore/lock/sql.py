"""``SqlCatalogLock``: Paimon's JDBC catalog lock, on SQLAlchemy, in the Airflow metadata DB.

One row per held lock in ``lakecore_catalog_locks``; the primary key does the excluding:

* acquire = INSERT. Contention is the primary-key violation and nothing else: every other
  database error propagates.
* release = DELETE by lock id *and* owner, in ``finally``. Each acquisition has its own owner
  token, so a holder can never delete a row another owner inserted after taking over.
* a row whose own stored expiry has passed (its holder died) is deleted by the next acquirer.
  Ages are measured on the database's clock, one clock for every machine, so client clock skew
  between Spark drivers cannot make a live lock look stale.
* waiting is capped exponential backoff (with jitter) up to ``lock-acquire-timeout``; the
  timeout error names the holder and since when.

Connections are validated on checkout (``pool_pre_ping``), so a pooled connection the server
dropped is replaced instead of failing a commit. SQLite (own file, busy timeout), PostgreSQL
and MySQL/MariaDB are supported.
"""

from __future__ import annotations

import logging
import math
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from sqlalchemy import (
    BigInteger,
    String,
    bindparam,
    create_engine,
    delete,
    event,
    insert,
    inspect,
    literal_column,
    select,
)
from sqlalchemy.engine import URL, Connection, CursorResult, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.sql.elements import BindParameter, ColumnClause

from lakecore.errors import CatalogLockError, CatalogLockTimeoutError
from lakecore.lock.base import DEFAULT_ACQUIRE_TIMEOUT, DEFAULT_CHECK_MAX_SLEEP
from lakecore.lock.sql_schema import (
    LOCK_ID_MAX_LENGTH,
    LOCKS,
    NOW_MS,
    TABLE_NAME,
    LockHolder,
    is_duplicate_key,
    sqlite_pragmas,
    utc_millis,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

MIN_SLEEP_SECONDS = 0.01
HOLDER_CHECK_SECONDS = 1.0
SQLITE_BUSY_TIMEOUT_SECONDS = 30.0
CONNECT_TIMEOUT_SECONDS = 10

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
    ) -> None:
        from sqlalchemy.engine import make_url

        self.url = make_url(url)
        self.dialect = self.url.get_backend_name()
        if self.dialect not in NOW_MS:
            raise CatalogLockError(
                f"catalog lock database {self.dialect!r} is not supported: "
                "use PostgreSQL, MySQL/MariaDB or SQLite"
            )
        if self.dialect == "sqlite" and self.url.database in (None, "", ":memory:"):
            raise CatalogLockError(
                "an in-memory SQLite database cannot be shared between processes: "
                "give the catalog lock a file (sqlite:////path/to/lakecore-locks.db)"
            )
        self.catalog_key = catalog_key
        self.acquire_timeout = acquire_timeout
        self.check_max_sleep = check_max_sleep
        # Paimon's JDBC lock stores the acquire timeout as the row's expiry; so do we by default.
        self.expire = expire if expire is not None else acquire_timeout
        self.expire_seconds = max(1, math.ceil(self.expire.total_seconds()))
        self.clock, self.sleep = clock, sleep
        self.rng = rng or random.Random()
        self.engine_options = dict(engine_options or {})
        # Built once: executing a prepared construct with parameters skips rebuilding and
        # re-keying it on every call (the lock sits on every commit's path).
        now_ms: ColumnClause[int] = literal_column(NOW_MS[self.dialect], BigInteger)
        lock_id: BindParameter[str] = bindparam("lock_id", type_=String)
        owner: BindParameter[str] = bindparam("owner", type_=String)
        self._insert = insert(LOCKS).values(lock_id=lock_id, owner=owner, acquired_at=now_ms,
                                            expire_seconds=self.expire_seconds)
        self._select = select(LOCKS.c.owner, LOCKS.c.acquired_at, LOCKS.c.expire_seconds,
                              now_ms.label("now_ms")).where(LOCKS.c.lock_id == lock_id)
        self._delete = delete(LOCKS).where(LOCKS.c.lock_id == lock_id, LOCKS.c.owner == owner)
        self._delete_expired = self._delete.where(
            LOCKS.c.acquired_at + LOCKS.c.expire_seconds * 1000 < now_ms)
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
                        connect_args={"connect_timeout": CONNECT_TIMEOUT_SECONDS})
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

    @staticmethod
    def _ensure_table(engine: Engine) -> None:
        """CREATE TABLE if missing; a concurrent creator winning the race is fine."""
        try:
            LOCKS.create(engine, checkfirst=True)
        except DBAPIError:
            if not inspect(engine).has_table(TABLE_NAME):
                raise

    def close(self) -> None:
        with self._init_lock:
            if self._engine_obj is not None and self._engine_pid == os.getpid():
                self._engine_obj.dispose()
            self._engine_obj = None

    # -- the lock ------------------------------------------------------------------------
    def lock_id(self, database: str, table: str) -> str:
        lock_id = f"{self.catalog_key}.{database}.{table}"
        if len(lock_id) > LOCK_ID_MAX_LENGTH:
            raise CatalogLockError(
                f"catalog lock id {lock_id[:60]!r}... is {len(lock_id)} characters; "
                f"the lock table allows {LOCK_ID_MAX_LENGTH}"
            )
        return lock_id

    @staticmethod
    def new_owner() -> str:
        """A token unique to one acquisition that still tells a human who it is."""
        thread = threading.current_thread().name
        owner = f"{socket.gethostname()}/pid={os.getpid()}/{thread}/{uuid.uuid4().hex[:12]}"
        return owner[-255:]

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
                if took > self.expire.total_seconds():
                    log.error("held catalog lock %s for %.1f s, longer than its expiry of "
                              "%s s: another committer may have taken it over", lock_id, took,
                              self.expire.total_seconds())
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
        start = self.clock()
        deadline = start + self.acquire_timeout.total_seconds()
        cap = max(MIN_SLEEP_SECONDS, self.check_max_sleep.total_seconds())
        backoff = MIN_SLEEP_SECONDS
        holder: LockHolder | None = None
        looked_at: float | None = None
        while True:
            if self._try_insert(conn, lock_id, owner):
                return
            now = self.clock()
            if looked_at is None or now - looked_at >= HOLDER_CHECK_SECONDS or now >= deadline:
                looked_at = now
                current = self._holder(conn, lock_id)
                if current is not None and current.stale:
                    if self._delete_stale(conn, current):
                        log.warning("took over stale catalog lock %s from %s (acquired %s, "
                                    "expired %s)", lock_id, current.owner,
                                    current.acquired_at.isoformat(),
                                    current.expires_at.isoformat())
                    continue  # retry the insert at once
                if current is None and now < deadline:
                    continue  # released between our insert and our look: try again at once
                holder = current or holder
            if now >= deadline:
                raise CatalogLockTimeoutError(
                    lock_id, now - start,
                    holder.owner if holder else None,
                    holder.acquired_at if holder else None,
                    holder.expires_at if holder else None,
                )
            conn.close()  # back to the pool while we wait; re-validated on next use
            wait = min(backoff, deadline - now)
            self.sleep(wait * (0.5 + self.rng.random() / 2))
            backoff = min(cap, backoff * 2)

    def _try_insert(self, conn: _Connection, lock_id: str, owner: str) -> bool:
        for attempt in range(3):
            try:
                conn.execute(self._insert, {"lock_id": lock_id, "owner": owner})
                return True
            except IntegrityError as e:
                if not is_duplicate_key(self.dialect, e):
                    raise
                return False
            except DBAPIError as e:
                # The server dropped the connection mid-statement: the insert may have landed.
                # Our owner token is unique, so the row tells us; otherwise try again.
                if not _invalidated(e) or attempt == 2:
                    raise
                held = self._holder(conn, lock_id)
                if held is not None:
                    return held.owner == owner
        return False  # pragma: no cover - the loop returns or raises

    def _holder(self, conn: _Connection, lock_id: str) -> LockHolder | None:
        row = conn.execute(self._select, {"lock_id": lock_id}).first()
        if row is None:
            return None
        acquired, expire, now = int(row.acquired_at), int(row.expire_seconds), int(row.now_ms)
        return LockHolder(lock_id, row.owner, utc_millis(acquired), expire,
                          stale=now > acquired + expire * 1000)

    def _delete_stale(self, conn: _Connection, stale: LockHolder) -> bool:
        """Delete exactly that stale row (same owner token), if it is still there."""
        params = {"lock_id": stale.lock_id, "owner": stale.owner}
        return bool(conn.execute(self._delete_expired, params).rowcount)

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
                    log.error("catalog lock %s was no longer held by %s at release: it was "
                              "taken over after its expiry", lock_id, owner)
                return
            except DBAPIError as e:
                if _invalidated(e) and attempt < 2:
                    continue
                log.exception("could not release catalog lock %s held by %s; it expires "
                              "after %s s", lock_id, owner, self.expire.total_seconds())
                return

    def holder(self, database: str, table: str) -> LockHolder | None:
        """Who holds the table's lock now (for ``lakecore inspect``), or None."""
        conn = _Connection(self)
        try:
            return self._holder(conn, self.lock_id(database, table))
        finally:
            conn.close()
