"""One lock: Java Paimon's ``JdbcCatalogLock`` and lakecore's SQL lock on one table, for real.

The Java side is Java Paimon 1.4.2 itself (the oracle JVM: a ``JdbcCatalog`` over the warehouse,
``lock_commit`` / ``hold_lock``), the lakecore side is lakecore's catalog lock
(``lakecore.lock.SqlCatalogLock``, in this process or in writer processes). Both use Paimon's
``paimon_distributed_locks`` under the lock id ``<catalog-key>.<db>.<table>``, on SQLite and on
the PostgreSQL test server.

* Concurrent commits: lakecore writer processes and the Java JVM commit to one primary-key table
  at the same time. Afterwards the snapshot ids are contiguous, every snapshot was built on the
  one before it, every commit's rows are there exactly once (lakecore and Java read the same
  rows) and the lock table holds no row of the test.
* A Java lock that outlives its expiry: lakecore waits for the row while it is live and takes it
  over once Paimon's own comparison (``acquired_at`` + ``expire_time_seconds`` against the
  database's now, strict ``>``) says it is expired -- what JdbcCatalogLock does. Java's late
  release deletes by lock id alone (``*DistributedLockDialect.getReleaseLockSql``), so it deletes
  lakecore's row: pinned here, documented in docs/catalog-lock.md.
* The reverse: Java takes over an expired lakecore row; lakecore's late release is fenced by
  its owner token and leaves Java's row alone.

PostgreSQL stores ``acquired_at`` in the session time zone: the JVM gets
``-Duser.timezone=<the server's TimeZone>`` (tests/javapaimon/README.md), so this module runs
its own JVM.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
import pytest
from sqlalchemy import create_engine, text

from lakecore import CatalogFactory, Schema
from lakecore.lock import SqlCatalogLock
from tests.databases import POSTGRESQL, database_url
from tests.faults.harness import check_history, missing_files, read_rows, snapshots
from tests.javapaimon.client import JavaPaimon, JavaPaimonError, at
from tests.javapaimon.conftest import java_or_skip
from tests.lock import workers
from tests.lock.backends import unique_key

SOAK = os.environ.get("LAKECORE_MODEL_PROFILE", "fast") == "soak"
PROCESSES = 2  # lakecore writer processes
COMMITS = 40 if SOAK else 6  # per lakecore process
JAVA_COMMITS = 40 if SOAK else 6
ROWS = 3  # rows per commit
SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("writer", pa.string())])
# forked after the JVM's client thread started: the children only run lakecore (as
# tests/lock/test_concurrent_commits.py's writers), and start without importing anything
FORK = multiprocessing.get_context("fork")
BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.database("postgresql"))]


def _server_timezone() -> str | None:
    """The PostgreSQL test server's TimeZone, or None when no server answers (its tests then
    skip, or fail under LAKECORE_REQUIRE_DATABASES, on their own)."""
    url = os.environ.get("LAKECORE_TEST_PG_URL") or "postgresql+psycopg://postgres@127.0.0.1/test"
    engine = create_engine(url, connect_args={"connect_timeout": 2})
    try:
        with engine.connect() as conn:
            return str(conn.execute(text("SHOW TimeZone")).scalar())
    except Exception:
        return None
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def java_paimon() -> Iterator[JavaPaimon]:
    """This module's JVM: in the PostgreSQL server's time zone (see the module docstring)."""
    java_or_skip()
    tz = _server_timezone()
    with JavaPaimon(jvm_args=(f"-Duser.timezone={tz}",) if tz else ()) as jp:
        yield jp


class Db:
    """One lock database as both sides address it: lakecore's SQLAlchemy URL, Java's JDBC
    catalog options, and a connection for looking at the lock table."""

    def __init__(self, backend: str, tmp_path: Path) -> None:
        self.key = unique_key()
        self.lock_id = f"{self.key}.db.t"
        self.warehouse = str(tmp_path / "wh")
        if backend == "sqlite":
            self.url = f"sqlite:///{tmp_path / 'locks.db'}"
            self.java: dict[str, Any] = {"uri": f"jdbc:sqlite:{tmp_path / 'locks.db'}"}
        else:
            self.url = database_url(POSTGRESQL)
            u = urlsplit(self.url)
            self.java = {"uri": f"jdbc:postgresql://{u.hostname}:{u.port or 5432}{u.path}",
                         "user": u.username or "postgres"}
            if u.password:
                self.java["password"] = u.password
        self.java.update({"catalog-key": self.key, "warehouse": self.warehouse})
        self.engine = create_engine(self.url)

    def lakecore_options(self, **extra: str) -> dict[str, str]:
        return {"warehouse": self.warehouse, "lock.enabled": "true", "lock.uri": self.url,
                "catalog-key": self.key, **extra}

    def create_table(self, **options: str) -> Any:
        """``db.t`` (SCHEMA, key ``id``) made by lakecore through a catalog with the lock."""
        catalog = CatalogFactory.create(self.lakecore_options(**{"lock-check-max-sleep": "100 ms"}))
        catalog.create_database("db", ignore_if_exists=True)
        catalog.create_table("db.t", Schema.from_pyarrow_schema(
            SCHEMA, primary_keys=["id"], options={"bucket": "2", **options}))
        return catalog

    def catalog(self, **extra: Any) -> dict[str, Any]:
        """Java's ``catalog`` (JdbcCatalog options), with catalog options such as
        ``lock-acquire-timeout``."""
        return {**self.java, **extra}

    def rows(self) -> list[tuple[Any, ...]]:
        """The lock table's rows of this test: (lock_id, lock_owner)."""
        with self.engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(
                "SELECT lock_id, lock_owner FROM paimon_distributed_locks "
                "WHERE lock_id LIKE :k"), {"k": self.key + ".%"})]

    def close(self) -> None:
        with self.engine.begin() as conn:
            conn.execute(text("DELETE FROM paimon_distributed_locks WHERE lock_id LIKE :k"),
                         {"k": self.key + ".%"})
            if conn.dialect.has_table(conn, "paimon_tables"):
                conn.execute(text("DELETE FROM paimon_tables WHERE catalog_key = :k"),
                             {"k": self.key})
        self.engine.dispose()


@pytest.fixture(params=BACKENDS)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Db]:
    d = Db(str(request.param), tmp_path)
    yield d
    d.close()


# ------------------------------------------------------------------ concurrent commits

@pytest.mark.slow  # 20-30 s: two writer processes start, Java's first JDBC catalog warms up
def test_java_and_lakecore_processes_commit_at_the_same_time(
        java_paimon: JavaPaimon, db: Db, tmp_path: Path) -> None:
    """PROCESSES lakecore processes x COMMITS commits (default writers: each compacts its
    buckets inline, an APPEND and a COMPACT per commit) and Java x JAVA_COMMITS batch commits
    through JdbcCatalogLock, all started together on one 2-bucket primary-key table."""
    jp = java_paimon
    options = db.lakecore_options(**{"lock-check-max-sleep": "100 ms"})
    catalog = db.create_table(**{"commit.max-retry-wait": "500 ms"})

    # They commit together; each lakecore writer's second half waits until Java has committed
    # once (a loaded machine could otherwise run the writers one after the other)
    go, java_in = tmp_path / "go", tmp_path / "java-in"
    # Java registers the table in its JdbcCatalog (repairTable) with one commit first, so
    # that its timed commits below start at once
    warm = jp.call("lock_commit", catalog=db.catalog(), table="db.t", rows=[[0, "java"]])
    assert warm["registered"]
    users = [f"lakecore-{i}" for i in range(PROCESSES)]
    procs = [FORK.Process(target=workers.upsert, args=({
        "catalog": options, "table": "db.t", "user": user, "n": COMMITS, "rows": ROWS,
        "base": (i + 1) * 1_000_000, "report": str(tmp_path / f"report-{i}.json"),
        "go": str(go), "pause_after": COMMITS // 2 + 1, "until": str(java_in)},))
        for i, user in enumerate(users)]
    for p in procs:
        p.start()
    # Java: one commit per batch, each under JdbcCatalogLock. write-only: a Java writer that
    # compacted here would fail its commit on a lakecore compaction of the same files (Paimon
    # gives up on a file deletion conflict), as a Flink job without a dedicated compaction
    # job would; commit.max-retries is raised for the lost snapshot races (default 10).
    java_ids = [[j * 10 + k, "java"] for j in range(1, JAVA_COMMITS + 1) for k in range(ROWS)]
    batches = [java_ids[i:i + ROWS] for i in range(0, len(java_ids), ROWS)]
    answer: dict[str, Any] = {}

    def java() -> None:
        try:
            answer.update(jp.call("lock_commit", catalog=db.catalog(), table="db.t",
                                  batches=batches,
                                  options={"write-only": "true", "commit.max-retries": "200"}))
        except BaseException as e:  # reported below
            answer["error"] = e

    deadline = time.monotonic() + 120
    while not all(Path(f"{go}.{u}").exists() for u in users):  # imports done, table open
        assert time.monotonic() < deadline and all(p.is_alive() for p in procs)
        time.sleep(0.02)
    java_thread = threading.Thread(target=java)
    started = time.monotonic()
    warm_users = {s.commit_user for s in snapshots(catalog.get_table("db.t"))}
    java_thread.start()
    go.write_text("go")
    while not java_in.exists():
        users_now = {s.commit_user for s in snapshots(catalog.get_table("db.t"))}
        if users_now - warm_users - set(users) or not java_thread.is_alive():
            java_in.write_text("in")
        time.sleep(0.02)
    for p in procs:
        p.join(300)
    lakecore_s = time.monotonic() - started
    java_thread.join(300)
    java_s = time.monotonic() - started
    print(f"lakecore {PROCESSES} x {COMMITS} commits: {lakecore_s:.1f} s, "
          f"Java {JAVA_COMMITS} commits: {java_s:.1f} s")
    assert [p.exitcode for p in procs] == [0] * PROCESSES
    assert "error" not in answer, answer.get("error")
    assert answer["commits"] == JAVA_COMMITS

    table = catalog.get_table("db.t")
    snaps = check_history(table)  # contiguous ids, each on the one before, nothing twice
    appends = [s for s in snaps if s.commit_kind.value == "APPEND"]
    java_appends = [s for s in appends if s.commit_user not in users]
    assert len(java_appends) == JAVA_COMMITS + 1  # with the first one
    assert len({s.commit_user for s in java_appends}) == JAVA_COMMITS + 1
    for user in users:
        assert [s.commit_identifier for s in appends if s.commit_user == user] == list(
            range(1, COMMITS + 1))
    # they did commit at the same time: a Java commit landed between lakecore's
    lakecore_ids = [s.id for s in appends if s.commit_user in users]
    assert any(min(lakecore_ids) < s.id < max(lakecore_ids) for s in java_appends[1:]), (
        [s.id for s in java_appends], lakecore_ids)

    ids = Counter(r["id"] for r in read_rows(table))
    expected = {(i + 1) * 1_000_000 + ident * 10 + k for i in range(PROCESSES)
                for ident in range(1, COMMITS + 1) for k in range(ROWS)}
    expected |= {row[0] for row in java_ids} | {0}
    assert set(ids) == expected and max(ids.values()) == 1
    java_read = sorted(tuple(r) for r in jp.call("read", **at(Path(db.warehouse)))["rows"])
    assert java_read == sorted((r["id"], r["writer"]) for r in read_rows(table))
    assert missing_files(table) == set()
    assert db.rows() == []
    catalog.close()


# ------------------------------------------------------------------ a lock outliving its expiry

class Holder(threading.Thread):
    """lakecore's lock held in a thread: ``entered`` once inside, leaves when ``leave`` is
    set; ``started`` / ``entered_at`` on the monotonic clock."""

    def __init__(self, lock: SqlCatalogLock) -> None:
        super().__init__(daemon=True)
        self.lock = lock
        self.entered = threading.Event()
        self.leave = threading.Event()
        self.started = self.entered_at = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        def inside() -> None:
            self.entered_at = time.monotonic()
            self.entered.set()
            assert self.leave.wait(60)

        self.started = time.monotonic()
        try:
            self.lock.run_with_lock("db", "t", inside)
        except BaseException as e:  # reported by the test
            self.error = e
            self.entered.set()


def test_lakecore_takes_over_a_java_lock_after_its_expiry(
        java_paimon: JavaPaimon, db: Db, caplog: pytest.LogCaptureFixture) -> None:
    """Java holds the lock for 4 s with lock-acquire-timeout 1 s (Paimon stores
    expire_time_seconds = 1000 ms / 1000 = 1). lakecore waits while the row is live and takes
    it over once it is expired -- before Java lets go. Java's release (DELETE by lock id) then
    deletes lakecore's row while lakecore is still inside: a third writer gets in at once.
    lakecore's own release finds no row and logs it."""
    jp = java_paimon
    lock = SqlCatalogLock(db.url, catalog_key=db.key, check_max_sleep=timedelta(milliseconds=100))
    db.create_table().close()
    lock.engine()  # the lock table exists (with lock_owner) before Java's catalog opens it
    jp.call("hold_lock", catalog=db.catalog(**{"lock-acquire-timeout": "1 s"}), table="db.t",
            millis=4000, background=True, lock="table")
    java_held = time.monotonic()
    java_row = lock.holder("db", "t")
    assert java_row is not None and java_row.owner is None  # Java's row: no owner token
    assert java_row.expire_seconds == 1

    holder = Holder(lock)
    holder.start()
    assert holder.entered.wait(30) and holder.error is None, holder.error
    assert holder.entered_at < java_held + 4.0  # not by waiting for Java's release ...
    ours = lock.holder("db", "t")
    assert ours is not None and ours.owner is not None  # lakecore's row now ...
    # ... inserted only once Java's was expired on the database's clock (strict '>', whole
    # seconds on SQLite)
    assert (ours.acquired_at - java_row.acquired_at).total_seconds() > 1.0

    assert jp.call("wait_locks")["held_ms"][0] >= 4000  # Java's late release ...
    assert holder.is_alive() and db.rows() == []  # ... deleted lakecore's row (by lock id)
    third = SqlCatalogLock(db.url, catalog_key=db.key, acquire_timeout=timedelta(seconds=2))
    third_in: list[bool] = []
    third.run_with_lock("db", "t", lambda: third_in.append(True))  # enters at once
    assert third_in == [True]
    third.close()

    with caplog.at_level(logging.ERROR, logger="lakecore.lock.sql"):
        holder.leave.set()
        holder.join(30)
    assert holder.error is None
    assert any("no longer held" in r.getMessage() and "deleted while held" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]
    assert db.rows() == []
    lock.close()


def test_java_takes_over_a_lakecore_lock_after_its_expiry(
        java_paimon: JavaPaimon, db: Db, caplog: pytest.LogCaptureFixture) -> None:
    """lakecore holds the lock with lock-expire-time 1 s for longer; Java's JdbcCatalogLock
    deletes the expired row (getTryReleaseTimedOutLock) and takes the lock. lakecore's late
    release is fenced by its owner token: Java's row stays until Java releases it."""
    jp = java_paimon
    db.create_table().close()
    lock = SqlCatalogLock(db.url, catalog_key=db.key, expire=timedelta(seconds=1))
    holder = Holder(lock)
    holder.start()
    assert holder.entered.wait(30) and holder.error is None, holder.error
    ours = lock.holder("db", "t")
    assert ours is not None and ours.owner is not None and ours.expire_seconds == 1

    jp.call("hold_lock", catalog=db.catalog(**{"lock-check-max-sleep": "100 ms"}),
            table="db.t", millis=1500, background=True, lock="table")
    java_row = lock.holder("db", "t")
    assert holder.is_alive() and java_row is not None and java_row.owner is None  # Java's row
    # inserted only once lakecore's was expired on the database's clock
    assert (java_row.acquired_at - ours.acquired_at).total_seconds() > 1.0
    assert java_row.expire_seconds == 480  # Java's default lock-acquire-timeout, 8 min

    with caplog.at_level(logging.ERROR, logger="lakecore.lock.sql"):
        holder.leave.set()
        holder.join(30)
    assert holder.error is None
    assert db.rows() == [(db.lock_id, None)]  # lakecore's release left Java's row alone
    assert any("taken over after its expiry by a writer without an owner token"
               in r.getMessage() for r in caplog.records)
    assert jp.call("wait_locks")["held_ms"][0] >= 1500
    assert db.rows() == []
    lock.close()


def test_java_catalog_lock_on_sqlite_cannot_release_after_a_takeover(
        java_paimon: JavaPaimon, tmp_path: Path) -> None:
    """JdbcCatalog.runWithLock (the lock Java's createTable / alterTable take) runs on the
    catalog's own pool, whose connections keep the DatabaseMetaData.getTables result sets of
    the catalog's start open (see tests/javapaimon/README.md). On SQLite in WAL mode such a
    connection reads an old snapshot, and once another writer has written the lock table, its
    write fails: Java's late release raises SQLITE_BUSY_SNAPSHOT and lakecore's row, which
    took over the expired one, stays (lakecore's release deletes it). The table commit's lock
    (own pool, test_lakecore_takes_over_a_java_lock_after_its_expiry) releases normally. If
    this starts failing, Paimon closed those result sets."""
    db = Db("sqlite", tmp_path)
    lock = SqlCatalogLock(db.url, catalog_key=db.key, check_max_sleep=timedelta(milliseconds=100))
    lock.engine()
    jp = java_paimon
    jp.call("hold_lock", catalog=db.catalog(**{"lock-acquire-timeout": "1 s"}), table="db.t",
            millis=3000, background=True, lock="catalog")
    holder = Holder(lock)
    holder.start()
    assert holder.entered.wait(30) and holder.error is None, holder.error
    with pytest.raises(JavaPaimonError, match="SQLITE_BUSY_SNAPSHOT"):
        jp.call("wait_locks")
    [(_, owner)] = db.rows()
    assert owner is not None  # lakecore's row survived Java's failed release
    holder.leave.set()
    holder.join(30)
    assert holder.error is None and db.rows() == []
    lock.close()
    db.close()
