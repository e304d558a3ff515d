"""lakecore and Java Paimon's JDBC catalog lock exclude each other on one lock database.

The "Java writer" here runs the statements Paimon's JdbcCatalogLock issues, copied from
Paimon's source (``JdbcUtils``: table ``paimon_distributed_locks``, lock id
``<catalog-key>.<database>.<table>``; ``*DistributedLockDialect``: the acquire INSERT, the
release DELETE by lock id, the timed-out DELETE; ``AbstractDistributedLockDialect.lockAcquire``:
``expire_time_seconds = acquireTimeoutMillis / 1000``). The expected outcomes are Paimon's: a
row excludes every other acquirer of its lock id until it is deleted or its
``expire_time_seconds`` have passed on the database's clock.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import Engine, create_engine, inspect, text
from sqlalchemy.exc import IntegrityError

from lakecore import CatalogFactory, Schema
from lakecore.errors import CatalogLockTimeoutError
from lakecore.lock import SqlCatalogLock

# Paimon's statements (JDBC "?" placeholders written as SQLAlchemy named parameters).
PAIMON_ACQUIRE = "INSERT INTO paimon_distributed_locks (lock_id,expire_time_seconds) VALUES (?,?)"
PAIMON_RELEASE = "DELETE FROM paimon_distributed_locks WHERE lock_id = ?"
PAIMON_EXPIRED = {  # getTryReleaseTimedOutLock, per dialect
    "sqlite": "DELETE FROM paimon_distributed_locks WHERE  strftime('%s', 'now') - "
              "strftime('%s', acquired_at) > expire_time_seconds and lock_id = ?",
    "mysql": "DELETE FROM paimon_distributed_locks WHERE TIMESTAMPDIFF(SECOND, acquired_at, "
             "NOW()) >expire_time_seconds and lock_id = ?",
    "postgresql": "DELETE FROM paimon_distributed_locks WHERE EXTRACT(EPOCH FROM AGE(NOW(), "
                  "acquired_at)) >expire_time_seconds and lock_id = ?",
}


def jdbc(sql: str, engine: Engine, *args: Any) -> int:
    """Run one of Paimon's statements with positional parameters; its update count."""
    named = sql
    params: dict[str, Any] = {}
    for i, arg in enumerate(args):
        named = named.replace("?", f":p{i}", 1)
        params[f"p{i}"] = arg
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        return int(conn.execute(text(named), params).rowcount)


class JavaPaimonWriter:
    """JdbcCatalogLock.runWithLock's database side: acquire = clear a timed-out row, then
    insert; release = delete by lock id."""

    def __init__(self, lock: SqlCatalogLock, acquire_timeout_ms: int) -> None:
        self.engine = create_engine(lock.url)
        self.dialect = "mysql" if lock.dialect in ("mysql", "mariadb") else lock.dialect
        self.timeout_ms = acquire_timeout_ms

    def try_acquire(self, lock_id: str) -> bool:
        jdbc(PAIMON_EXPIRED[self.dialect], self.engine, lock_id)
        try:
            return jdbc(PAIMON_ACQUIRE, self.engine, lock_id, self.timeout_ms // 1000) > 0
        except IntegrityError:  # lockAcquire: any SQLException means "not acquired"
            return False

    def release(self, lock_id: str) -> None:
        jdbc(PAIMON_RELEASE, self.engine, lock_id)

    def close(self) -> None:
        self.engine.dispose()


def lock_table(lock: SqlCatalogLock) -> dict[str, Any]:
    columns = inspect(lock.engine()).get_columns("paimon_distributed_locks")
    return {str(c["name"]).lower(): c for c in columns}


def test_lakecore_creates_paimons_table_and_inserts_paimons_row(make_lock, catalog_key):
    """JdbcUtils / *DistributedLockDialect.getCreateTableSql: lock_id, acquired_at,
    expire_time_seconds; lakecore adds a nullable lock_owner, which Paimon's statements never
    name. The held row: lock id "<catalog-key>.db.t", expiry 480 s for the default 8 min."""
    lock = make_lock()
    assert set(lock_table(lock)) == {"lock_id", "acquired_at", "expire_time_seconds",
                                     "lock_owner"}
    assert lock_table(lock)["lock_owner"]["nullable"]
    seen: dict[str, Any] = {}

    def inside() -> None:
        with lock.engine().connect() as conn:
            seen["rows"] = conn.execute(text(
                "SELECT lock_id, expire_time_seconds, lock_owner FROM paimon_distributed_locks "
                "WHERE lock_id LIKE :k"), {"k": f"{catalog_key}.%"}).all()

    lock.run_with_lock("db", "t", inside)
    ((lock_id, expire, owner),) = seen["rows"]
    assert (lock_id, expire) == (f"{catalog_key}.db.t", 480)
    assert owner and len(owner) <= 36
    assert lock.holder("db", "t") is None


@pytest.mark.parametrize(("timeout", "stored"), [
    (timedelta(minutes=8), 480), (timedelta(milliseconds=2500), 2),
    (timedelta(milliseconds=1999), 1), (timedelta(seconds=59, microseconds=999_999), 59)])
def test_expire_seconds_are_rounded_down_as_paimon_does(make_lock, timeout, stored):
    """AbstractDistributedLockDialect.lockAcquire stores timeoutMillSeconds / 1000 (Java long
    division: rounded down) for the acquire timeout in milliseconds (Duration.toMillis)."""
    lock = make_lock(acquire_timeout=timeout)
    assert lock.expire_seconds == stored
    held: list[int] = []
    lock.run_with_lock("db", "t", lambda: held.append(lock.holder("db", "t").expire_seconds))
    assert held == [stored]


def _commit_options(lock_url: str, catalog_key: str, warehouse: str) -> dict[str, str]:
    return {"warehouse": warehouse, "lock.enabled": "true", "lock.uri": lock_url,
            "catalog-key": catalog_key, "lock-check-max-sleep": "100 ms"}


def _table(options: dict[str, str]):
    catalog = CatalogFactory.create(options)
    catalog.create_database("db", ignore_if_exists=True)
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    catalog.create_table("db.t", Schema.from_pyarrow_schema(
        schema, primary_keys=["id"], options={"bucket": "1", "write-only": "true"}),
        ignore_if_exists=True)
    return catalog, catalog.get_table("db.t")


def _commit_in_thread(table) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            wb = table.new_batch_write_builder()
            w = wb.new_write()
            w.write_arrow(pa.table({"id": pa.array([1], pa.int64()), "v": ["x"]}))
            out["ids"] = wb.new_commit().commit(w.prepare_commit()).snapshot_ids
            out["at"] = time.monotonic()
            w.close()
        except BaseException as e:  # reported by the test
            out["error"] = e

    thread = threading.Thread(target=run)
    return thread, out


def test_a_java_paimon_lock_row_blocks_a_commit_until_released(make_lock, lock_url,
                                                                catalog_key, tmp_path):
    """A row inserted with Paimon's own acquire statement (8 min timeout -> 480 s) keeps a
    lakecore commit of that table waiting; Paimon's release (DELETE by lock id) lets it
    through, and the commit lands then."""
    make_lock().engine()  # the table exists before the Java writer runs; cleanup registered
    catalog, table = _table(_commit_options(lock_url, catalog_key, str(tmp_path / "wh")))
    java = JavaPaimonWriter(make_lock(), acquire_timeout_ms=480_000)
    lock_id = f"{catalog_key}.db.t"
    try:
        assert java.try_acquire(lock_id)
        thread, out = _commit_in_thread(table)
        thread.start()
        time.sleep(2.0)
        assert thread.is_alive() and "ids" not in out
        assert table.snapshot_manager.latest() is None
        released = time.monotonic()
        java.release(lock_id)
        thread.join(60)
        assert "error" not in out, out.get("error")
        assert out["ids"] == (1,) and out["at"] >= released
        assert not java.try_acquire(lock_id) or java.release(lock_id) is None
    finally:
        java.close()
        catalog.close()


def test_an_expired_java_paimon_lock_row_is_taken_over(make_lock, lock_url, catalog_key,
                                                        tmp_path):
    """A Java writer that died holding a row with a 1 s expiry (acquire timeout 1500 ms ->
    1 s): the commit waits until the row is older than 1 s on the database's clock (Paimon's
    strict '>' comparison), then deletes it and commits."""
    make_lock().engine()
    catalog, table = _table(_commit_options(lock_url, catalog_key, str(tmp_path / "wh")))
    java = JavaPaimonWriter(make_lock(), acquire_timeout_ms=1500)
    lock_id = f"{catalog_key}.db.t"
    try:
        assert java.try_acquire(lock_id)
        inserted = time.monotonic()
        thread, out = _commit_in_thread(table)
        thread.start()
        thread.join(60)
        assert "error" not in out, out.get("error")
        assert out["ids"] == (1,)
        assert out["at"] - inserted >= 1.0
    finally:
        java.close()
        catalog.close()


def test_a_lakecore_holder_blocks_java_paimon_until_it_releases_or_expires(make_lock):
    """Paimon's acquire (timed-out DELETE, then INSERT) fails while lakecore holds the row;
    lakecore's release lets it in; a lakecore row past its expiry is cleared by Paimon's own
    timed-out DELETE."""
    lock = make_lock(acquire_timeout=timedelta(seconds=30), expire=timedelta(seconds=1))
    java = JavaPaimonWriter(lock, acquire_timeout_ms=30_000)
    lock_id = lock.lock_id("db", "t")
    seen: dict[str, bool] = {}
    try:
        lock.run_with_lock("db", "t", lambda: seen.setdefault("java", java.try_acquire(lock_id)))
        assert seen == {"java": False}
        assert java.try_acquire(lock_id)
        java.release(lock_id)
        lock.acquire(lock_id, "lakecore-died-holding-it")  # expire_time_seconds = 1
        assert not java.try_acquire(lock_id)
        time.sleep(2.2)
        assert java.try_acquire(lock_id)  # Paimon's timed-out DELETE removed our row
        java.release(lock_id)
    finally:
        java.close()


def test_a_java_row_in_the_timeout_error(make_lock, catalog_key):
    """The timeout error names a row without an owner token as Java Paimon's."""
    lock = make_lock(acquire_timeout=timedelta(milliseconds=300))
    lock.engine()  # the table exists before the Java writer runs
    java = JavaPaimonWriter(lock, acquire_timeout_ms=480_000)
    try:
        assert java.try_acquire(f"{catalog_key}.db.t")
        with pytest.raises(CatalogLockTimeoutError, match="Java Paimon") as info:
            lock.run_with_lock("db", "t", lambda: None)
        assert info.value.since is not None and info.value.expires is not None
        assert (info.value.expires - info.value.since) == timedelta(seconds=480)
    finally:
        java.close()


@pytest.fixture
def empty_lock_db(lock_url, catalog_key, backend):
    """A lock database with no lock table yet: a fresh SQLite file, a PostgreSQL schema or a
    MariaDB database of the test's own (dropped afterwards)."""
    if backend == "sqlite":
        yield lock_url
        return
    from sqlalchemy.engine import make_url

    name = catalog_key.replace("-", "_")
    admin = create_engine(lock_url)
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f"CREATE {'SCHEMA' if backend == 'postgresql' else 'DATABASE'} "
                          f"{name}"))
    url = make_url(lock_url)
    url = (url.update_query_dict({"options": f"-csearch_path={name}"})
           if backend == "postgresql" else url.set(database=name))
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text(f"DROP {'SCHEMA' if backend == 'postgresql' else 'DATABASE'} "
                              f"{name}{' CASCADE' if backend == 'postgresql' else ''}"))
        admin.dispose()


def test_a_table_java_paimon_created_gets_the_owner_column(empty_lock_db, catalog_key):
    """A table created by Paimon's own DDL (MysqlDistributedLockDialect.getCreateTableSql, the
    same text for every dialect: no lock_owner) is used as it is, plus a nullable lock_owner;
    a Java row in it still excludes lakecore."""
    engine = create_engine(empty_lock_db)
    with engine.begin() as conn:
        conn.execute(text(
            "CREATE TABLE paimon_distributed_locks(lock_id VARCHAR(255) NOT NULL,acquired_at "
            "TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL,expire_time_seconds BIGINT DEFAULT 0 "
            "NOT NULL,PRIMARY KEY (lock_id))"))
    jdbc(PAIMON_ACQUIRE, engine, f"{catalog_key}.db.held", 480)
    engine.dispose()
    lock = SqlCatalogLock(empty_lock_db, catalog_key=catalog_key,
                          acquire_timeout=timedelta(milliseconds=300))
    try:
        assert set(lock_table(lock)) == {"lock_id", "acquired_at", "expire_time_seconds",
                                         "lock_owner"}
        assert lock.run_with_lock("db", "t", lambda: 7) == 7
        with pytest.raises(CatalogLockTimeoutError, match="Java Paimon"):
            lock.run_with_lock("db", "held", lambda: None)
    finally:
        lock.close()


# -- the old table ---------------------------------------------------------------------------
OLD_DDL = ("CREATE TABLE lakecore_catalog_locks (lock_id VARCHAR(255) NOT NULL PRIMARY KEY, "
           "owner VARCHAR(255) NOT NULL, acquired_at BIGINT NOT NULL, "
           "expire_seconds BIGINT NOT NULL)")


def _old_row(url: str, lock_id: str, owner: str, age_ms: int, expire_seconds: int) -> None:
    """A row as lakecore wrote it before (epoch millis; the test's clock is the server's
    here: all test databases run on this machine)."""
    engine = create_engine(url)
    with engine.begin() as conn:
        if not inspect(conn).has_table("lakecore_catalog_locks"):
            conn.execute(text(OLD_DDL))
        conn.execute(text("INSERT INTO lakecore_catalog_locks VALUES (:i, :o, :a, :e)"),
                     {"i": lock_id, "o": owner, "a": int(time.time() * 1000) - age_ms,
                      "e": expire_seconds})
    engine.dispose()


def test_a_lock_held_in_the_old_table_is_honoured_until_released(lock_url, catalog_key,
                                                                  make_lock):
    """Upgrading while an older lakecore holds a lock in lakecore_catalog_locks: the first use
    reads the old table once, and that holder keeps the table locked until its row goes."""
    lock_id = f"{catalog_key}.db.t"
    _old_row(lock_url, lock_id, "old-writer", age_ms=0, expire_seconds=600)
    _old_row(lock_url, f"{catalog_key}.db.gone", "old-dead", age_ms=10_000, expire_seconds=1)
    lock = make_lock(acquire_timeout=timedelta(milliseconds=500))
    with pytest.raises(CatalogLockTimeoutError, match="old-writer.*lakecore_catalog_locks"):
        lock.run_with_lock("db", "t", lambda: None)
    assert lock.run_with_lock("db", "gone", lambda: 1) == 1  # expired there: not honoured
    engine = create_engine(lock_url)
    with engine.begin() as conn:  # the old holder releases, as old lakecore did
        conn.execute(text("DELETE FROM lakecore_catalog_locks WHERE lock_id = :i "
                          "AND owner = 'old-writer'"), {"i": lock_id})
    engine.dispose()
    assert lock.run_with_lock("db", "t", lambda: 2) == 2
