"""SqlCatalogLock against real SQLite / PostgreSQL / MariaDB: exclusion, expiry, errors."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import threading
import time
from datetime import timedelta

import pytest
from sqlalchemy import create_engine, event, text
from sqlalchemy.exc import DBAPIError

from lakecore.errors import CatalogLockError, CatalogLockTimeoutError
from lakecore.lock import CatalogLock, NoopLock, SqlCatalogLock
from tests.lock import workers


class FakeTime:
    """A clock that only moves when the lock sleeps: timeouts without waiting."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_both_locks_satisfy_the_protocol(tmp_path):
    assert isinstance(NoopLock(), CatalogLock)
    assert isinstance(SqlCatalogLock(f"sqlite:///{tmp_path}/l.db"), CatalogLock)
    assert NoopLock().run_with_lock("db", "t", lambda: 7) == 7


def test_mutual_exclusion_many_threads(make_lock, tmp_path):
    lock = make_lock(check_max_sleep=timedelta(milliseconds=20))
    counter = tmp_path / "counter"
    counter.write_text("0")
    inside, overlaps = [0], [0]
    guard = threading.Lock()

    def bump() -> None:
        with guard:
            inside[0] += 1
            overlaps[0] += inside[0] > 1
        value = int(counter.read_text())
        time.sleep(0.001)
        counter.write_text(str(value + 1))
        with guard:
            inside[0] -= 1

    def worker() -> None:
        for _ in range(10):
            lock.run_with_lock("db", "t", bump)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert int(counter.read_text()) == 6 * 10
    assert overlaps[0] == 0
    assert lock.holder("db", "t") is None


# Forked children start in milliseconds; each builds its own lock (and engine) after the fork.
_fork = multiprocessing.get_context("fork")


@pytest.mark.slow
def test_mutual_exclusion_several_processes(lock_url, catalog_key, make_lock, tmp_path):
    make_lock().engine()  # create the table up front; also registers cleanup
    counter = tmp_path / "counter"
    counter.write_text("0")
    args = {"url": lock_url, "key": catalog_key, "file": str(counter), "n": 20}
    procs = [_fork.Process(target=workers.counter, args=(args,)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    assert int(counter.read_text()) == 4 * 20


@pytest.mark.slow
def test_stale_lock_of_a_killed_holder_is_taken_over(lock_url, catalog_key, make_lock,
                                                      tmp_path):
    make_lock().engine()
    marker = tmp_path / "held"
    args = {"url": lock_url, "key": catalog_key, "expire": 1, "marker": str(marker)}
    proc = _fork.Process(target=workers.hold, args=(args,))
    proc.start()
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.is_alive(), "holder exited early"
            assert time.monotonic() < deadline, "holder never took the lock"
            time.sleep(0.02)
    finally:
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
    assert proc.exitcode == -signal.SIGKILL
    # Before its expiry the dead holder's row still excludes us, and the error names it.
    quick = make_lock(acquire_timeout=timedelta(milliseconds=100))
    with pytest.raises(CatalogLockTimeoutError, match=f"pid={proc.pid}/"):
        quick.run_with_lock("db", "t", lambda: None)
    # Once its own 1 s expiry has passed (database clock), the next acquirer takes over.
    patient = make_lock(acquire_timeout=timedelta(seconds=20),
                        check_max_sleep=timedelta(milliseconds=200))
    started = time.monotonic()
    assert patient.run_with_lock("db", "t", lambda: "mine") == "mine"
    assert time.monotonic() - started < 10
    assert patient.holder("db", "t") is None


def test_timeout_error_names_holder_and_since_with_capped_backoff(make_lock):
    holder = make_lock()
    fake = FakeTime()
    waiter = make_lock(acquire_timeout=timedelta(seconds=30),
                       check_max_sleep=timedelta(seconds=2), clock=fake.clock, sleep=fake.sleep)
    seen: dict[str, object] = {}

    def wait() -> None:
        try:
            waiter.run_with_lock("db", "t", lambda: None)
        except CatalogLockTimeoutError as e:
            seen["error"] = e

    def body() -> None:  # while the row is ours, another thread waits for it
        seen["holder"] = holder.holder("db", "t")
        thread = threading.Thread(target=wait)
        thread.start()
        thread.join(60)

    holder.run_with_lock("db", "t", body)
    err, who = seen["error"], seen["holder"]
    assert isinstance(err, CatalogLockTimeoutError) and who is not None
    assert err.holder == who.owner and err.since == who.acquired_at  # type: ignore[attr-defined]
    msg = str(err)
    assert who.owner in msg  # type: ignore[attr-defined]
    assert who.acquired_at.isoformat(timespec="seconds") in msg  # type: ignore[attr-defined]
    assert f"{waiter.catalog_key}.db.t" in msg and "30.0 s" in msg
    # capped exponential backoff (jitter: 50-100 % of each step) that stops at the deadline
    assert fake.sleeps[0] <= 0.01 and max(fake.sleeps) <= 2.0
    assert any(s > 1.0 for s in fake.sleeps)
    assert sum(fake.sleeps) == pytest.approx(30.0, abs=0.01)


def test_release_when_the_guarded_function_raises(make_lock):
    lock = make_lock()

    def boom() -> None:
        assert lock.holder("db", "t") is not None
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        lock.run_with_lock("db", "t", boom)
    assert lock.holder("db", "t") is None
    other = make_lock(acquire_timeout=timedelta(milliseconds=50))
    assert other.run_with_lock("db", "t", lambda: 1) == 1


def test_no_release_of_a_lock_another_owner_holds(make_lock):
    lock = make_lock()
    lock_id = lock.lock_id("db", "t")
    lock.acquire(lock_id, "owner-a")
    lock.release(lock_id, "owner-b")  # not ours: must not delete
    held = lock.holder("db", "t")
    assert held is not None and held.owner == "owner-a"
    lock.release(lock_id, "owner-a")
    assert lock.holder("db", "t") is None


def test_a_late_holder_does_not_release_the_owner_that_took_over(make_lock):
    """A's row expired and B took over; A finishing late must leave B's row alone."""
    lock = make_lock(acquire_timeout=timedelta(seconds=5))
    lock_id = lock.lock_id("db", "t")
    lock.engine()
    with lock.engine().begin() as conn:  # A's row with a 0 s expiry: stale a second later
        conn.execute(text("INSERT INTO paimon_distributed_locks "
                          "(lock_id, expire_time_seconds, lock_owner) VALUES (:id, 0, 'owner-a')"),
                     {"id": lock_id})
    time.sleep(2.1)
    stale = lock.holder("db", "t")
    assert stale is not None and stale.stale and stale.owner == "owner-a"
    lock.acquire(lock_id, "owner-b")
    lock.release(lock_id, "owner-a")
    held = lock.holder("db", "t")
    assert held is not None and held.owner == "owner-b" and not held.stale
    lock.release(lock_id, "owner-b")


def test_only_the_primary_key_violation_counts_as_contention(make_lock):
    lock = make_lock(acquire_timeout=timedelta(seconds=30))
    started = time.monotonic()
    with pytest.raises(DBAPIError):  # NOT NULL violation: an error, not "someone holds it"
        lock.acquire(None, "owner")  # type: ignore[arg-type]
    assert time.monotonic() - started < 5


class _RacedLock(SqlCatalogLock):
    """A lock whose look at the holder after a refused insert is raced by a real second
    committer, ``races`` times: the other committer releases just before the look and takes
    the lock again just after it (the interleaving 4 committers hit on MariaDB in CI)."""

    def __init__(self, *args, other: SqlCatalogLock, races: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.other, self.races, self.looks = other, races, 0

    def _holder(self, conn, lock_id):
        if self.looks >= self.races:
            return super()._holder(conn, lock_id)
        self.looks += 1
        self.other.release(lock_id, "owner-a")
        try:
            return super()._holder(conn, lock_id)
        finally:
            self.other.acquire(lock_id, "owner-a")


def test_a_lock_that_changes_hands_between_insert_and_look_is_waited_for(
        make_lock, lock_url, catalog_key):
    other = make_lock()
    lock_id = other.lock_id("db", "t")
    other.acquire(lock_id, "owner-a")
    raced = _RacedLock(lock_url, catalog_key=catalog_key, other=other, races=5,
                       acquire_timeout=timedelta(seconds=30))
    timer = threading.Timer(1.0, other.release, (lock_id, "owner-a"))
    try:
        timer.start()
        raced.acquire(lock_id, "owner-b")  # five refusals with no row behind them: a wait
        assert raced.looks == 5
        held = raced.holder("db", "t")
        assert held is not None and held.owner == "owner-b"
        raced.release(lock_id, "owner-b")
    finally:
        timer.join()
        raced.close()


def test_a_broken_lock_table_is_an_error_not_a_wait(tmp_path):
    url = f"sqlite:///{tmp_path}/broken.db"
    with create_engine(url).begin() as conn:
        conn.execute(text("CREATE TABLE paimon_distributed_locks (lock_id VARCHAR(255) "
                          "PRIMARY KEY, lock_owner VARCHAR(36))"))
    lock = SqlCatalogLock(url, acquire_timeout=timedelta(seconds=30))
    with pytest.raises(DBAPIError, match="expire_time_seconds"):
        lock.run_with_lock("db", "t", lambda: None)
    lock.close()


def test_lock_is_not_reentrant_and_ids_are_bounded(make_lock):
    lock = make_lock()
    with pytest.raises(CatalogLockError, match="not re-entrant"):
        lock.run_with_lock("db", "t", lambda: lock.run_with_lock("db", "t", lambda: None))
    assert lock.holder("db", "t") is None
    with pytest.raises(CatalogLockError, match="255"):
        lock.run_with_lock("db", "x" * 300, lambda: None)


def _server_id(dbapi_conn) -> int:
    info = getattr(dbapi_conn, "info", None)  # psycopg: info.backend_pid; PyMySQL: thread_id()
    return int(info.backend_pid) if info is not None else int(dbapi_conn.thread_id())


def _kill_server_connection(lock: SqlCatalogLock, conn_id: int) -> None:
    admin = create_engine(lock.url)
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        if lock.dialect == "postgresql":
            conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": conn_id})
        else:
            conn.execute(text(f"KILL {int(conn_id)}"))
    admin.dispose()


def test_dropped_connection_does_not_break_the_next_acquire(make_lock, backend):
    if backend == "sqlite":
        pytest.skip("SQLite has no server that can drop a connection")
    lock = make_lock()
    checked_out: list[int] = []  # server ids of the connections the lock checks out
    event.listen(lock.engine(), "checkout", lambda dbapi, _rec, _proxy: checked_out.append(
        _server_id(dbapi)))
    assert lock.run_with_lock("db", "t", lambda: 1) == 1
    pooled = checked_out[-1]
    _kill_server_connection(lock, pooled)  # the server drops the idle pooled connection
    time.sleep(0.2)
    assert lock.run_with_lock("db", "t", lambda: 2) == 2  # pre-ping replaced it
    assert checked_out[-1] != pooled

    def drop_mine() -> int:  # dropped while held: the release must still delete our row
        _kill_server_connection(lock, checked_out[-1])
        time.sleep(0.2)
        return 3

    assert lock.run_with_lock("db", "t", drop_mine) == 3
    assert lock.holder("db", "t") is None
    assert lock.run_with_lock("db", "t", lambda: 4) == 4


def test_lock_pickles_without_its_engine(make_lock):
    lock = make_lock()
    lock.run_with_lock("db", "t", lambda: None)
    clone = pickle.loads(pickle.dumps(lock))
    assert clone.run_with_lock("db", "t", lambda: "ok") == "ok"
    assert "password" not in repr(clone)
    clone.close()
