"""Catalog lock options (Paimon's keys) and the lock's place in the commit path."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

import pyarrow as pa
import pytest

from lakecore import CatalogFactory, Schema
from lakecore.errors import CatalogLockError, CatalogLockTimeoutError, OptionError
from lakecore.lock import NoopLock, SqlCatalogLock, lock_from_options, parse_lock_options
from lakecore.lock.options import normalize_lock_uri
from tests.faults.harness import snapshot_files
from tests.lock.backends import unique_key

T = TypeVar("T")
S3 = {"warehouse": "s3://bucket/warehouse"}


def test_defaults_off_for_local_files_on_for_object_stores(tmp_path):
    assert isinstance(lock_from_options({"warehouse": str(tmp_path)}), NoopLock)
    assert isinstance(lock_from_options({"warehouse": f"file://{tmp_path}"}), NoopLock)
    with pytest.raises(OptionError, match="lock.uri") as info:
        lock_from_options(S3)
    assert info.value.key == "lock.uri" and "lock.enabled=false" in str(info.value)
    lock = lock_from_options({**S3, "lock.uri": f"sqlite:///{tmp_path}/l.db"})
    assert isinstance(lock, SqlCatalogLock)
    assert (lock.catalog_key, lock.acquire_timeout, lock.check_max_sleep, lock.expire) == (
        "jdbc", timedelta(minutes=8), timedelta(seconds=8), timedelta(minutes=8))
    assert isinstance(lock_from_options({**S3, "lock.enabled": "false"}), NoopLock)


def test_explicit_options_are_parsed(tmp_path):
    parsed = parse_lock_options({
        "warehouse": str(tmp_path), "lock.enabled": "TRUE", "lock.type": "jdbc",
        "lock.uri": "postgres://u:secret@db.example:5432/airflow", "catalog-key": "prod",
        "lock-acquire-timeout": "30 s", "lock-check-max-sleep": "500 ms",
        "lock-expire-time": "2 min",
    })
    assert parsed.enabled and parsed.catalog_key == "prod"
    assert parsed.uri == "postgresql+psycopg://u:secret@db.example:5432/airflow"
    assert parsed.acquire_timeout == timedelta(seconds=30)
    assert parsed.check_max_sleep == timedelta(milliseconds=500)
    assert parsed.expire == timedelta(minutes=2)
    # Paimon's plain-number durations are milliseconds
    assert parse_lock_options({"lock-acquire-timeout": "1500"}).acquire_timeout == timedelta(
        milliseconds=1500)


@pytest.mark.parametrize(("given", "expected"), [
    ("postgres://u@h/db", "postgresql+psycopg://u@h/db"),
    ("postgresql://u@h:5433/db", "postgresql+psycopg://u@h:5433/db"),
    ("postgresql+psycopg://u@h/db", "postgresql+psycopg://u@h/db"),
    ("mysql://root@h:3306/airflow", "mysql+pymysql://root@h:3306/airflow"),
    ("mariadb://root@h/airflow", "mariadb+pymysql://root@h/airflow"),
    ("sqlite:////abs/locks.db", "sqlite:////abs/locks.db"),
    ("postgres://u:p%40ss@h/db?__extra__=%7B%7D&sslmode=require",
     "postgresql+psycopg://u:p%40ss@h/db?sslmode=require"),
])
def test_uri_schemes_are_pointed_at_installed_drivers(given, expected):
    assert normalize_lock_uri(given) == expected


@pytest.mark.parametrize(("options", "key"), [
    ({"lock.enabled": "yes"}, "lock.enabled"),
    ({"lock.type": "zookeeper"}, "lock.type"),
    ({"lock-acquire-timeout": "soon"}, "lock-acquire-timeout"),
    ({"lock-acquire-timeout": "0 s"}, "lock-acquire-timeout"),
    ({"lock-check-max-sleep": "-1 s"}, "lock-check-max-sleep"),
    ({"lock-expire-time": "500 ms"}, "lock-expire-time"),
    ({"catalog-key": "  "}, "catalog-key"),
    ({"lock.enable": "true"}, "lock.enable"),  # a typo must not silently disable the lock
    ({"lock.enabled": "true"}, "lock.uri"),
    ({"lock.uri": "jdbc:postgresql://h/db"}, "lock.uri"),
    ({"lock.uri": "not a url"}, "lock.uri"),
    ({"lock.enabled": "true", "lock.uri": "sqlite://"}, "lock.uri"),
    ({"lock.enabled": "true", "lock.uri": "oracle://u@h/db"}, "lock.uri"),
])
def test_bad_values_name_their_key(options, key):
    with pytest.raises(OptionError) as info:
        lock_from_options({"warehouse": "/tmp/wh", **options})
    assert info.value.key == key and repr(key) in str(info.value)


def test_errors_never_echo_the_password():
    with pytest.raises(OptionError) as info:
        lock_from_options({"lock.enabled": "true", "lock.uri": "oracle://u:hunter2@h/db"})
    assert "hunter2" not in str(info.value)
    lock = SqlCatalogLock("postgresql+psycopg://u:hunter2@h/db")
    assert "hunter2" not in repr(lock)


# -- through the catalog ----------------------------------------------------------------
SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])


def _catalog(tmp_path, lock_url: str, **extra: str):
    options = {"warehouse": str(tmp_path / "wh"), "lock.enabled": "true", "lock.uri": lock_url,
               "catalog-key": unique_key(), **extra}
    catalog = CatalogFactory.create(options)
    catalog.create_database("db", ignore_if_exists=True)
    catalog.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA), ignore_if_exists=True)
    return catalog


def _append(table, ids: list[int]):
    wb = table.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(pa.table({"id": ids, "v": [str(i) for i in ids]}, schema=SCHEMA))
    messages = w.prepare_commit()
    return wb.new_commit(), messages


class RecordingLock:
    """Wraps a lock and lists the table directory on entering and leaving the section."""

    def __init__(self, inner: SqlCatalogLock, table_dir: str) -> None:
        self.inner, self.table_dir = inner, table_dir
        self.sections: list[tuple[set[str], set[str]]] = []

    def _files(self) -> set[str]:
        return {os.path.join(d, f) for d, _, fs in os.walk(self.table_dir) for f in fs}

    def run_with_lock(self, database: str, table: str, fn: Callable[[], T]) -> T:
        def recorded() -> T:
            before = self._files()
            result = fn()
            self.sections.append((before, self._files()))
            return result

        return self.inner.run_with_lock(database, table, recorded)

    def close(self) -> None:
        self.inner.close()


def test_only_check_latest_create_snapshot_and_hints_run_under_the_lock(lock_url, tmp_path):
    catalog = _catalog(tmp_path, lock_url)
    recording = RecordingLock(catalog.lock, catalog.table_path("db.t"))  # type: ignore[arg-type]
    catalog.lock = recording
    table = catalog.get_table("db.t")
    for n in range(3):
        commit, messages = _append(table, [n * 10 + i for i in range(5)])
        commit.commit(messages)
    snap_dir = table.paths.snapshot_dir
    assert len(recording.sections) == 3
    for sid, (before, after) in enumerate(recording.sections, start=1):
        assert before - after == set()  # nothing deleted under the lock
        created = after - before
        hints = {f"{snap_dir}/LATEST", f"{snap_dir}/EARLIEST"}
        assert f"{snap_dir}/snapshot-{sid}" in created and created <= hints | {
            f"{snap_dir}/snapshot-{sid}"}
        # data files, manifests and manifest lists were all written before the lock
        needed = snapshot_files(table, table.snapshot_manager.snapshot(sid))
        assert needed - {f"{snap_dir}/snapshot-{sid}"} <= before
    assert recording.inner.holder("db", "t") is None
    catalog.close()


def test_commit_times_out_on_a_held_lock_and_leaves_the_table_as_it_was(lock_url, tmp_path):
    # A 300 ms acquire timeout alone would store expire_time_seconds 0 (Paimon's rounding),
    # a row stale at once: the holder's row keeps its own 60 s expiry.
    catalog = _catalog(tmp_path, lock_url, **{"lock-acquire-timeout": "300 ms",
                                              "lock-check-max-sleep": "50 ms",
                                              "lock-expire-time": "60 s"})
    table = catalog.get_table("db.t")
    commit, messages = _append(table, [1, 2])
    commit.commit(messages)
    lock = catalog.lock
    assert isinstance(lock, SqlCatalogLock)
    manifests_before = set(os.listdir(table.paths.manifest_dir))
    lock_id = lock.lock_id("db", "t")
    lock.acquire(lock_id, "spark-driver-of-another-dag")
    try:
        commit, messages = _append(table, [3])
        with pytest.raises(CatalogLockTimeoutError, match="spark-driver-of-another-dag"):
            commit.commit(messages)
    finally:
        lock.release(lock_id, "spark-driver-of-another-dag")
    assert table.snapshot_manager.latest_id() == 1
    assert set(os.listdir(table.paths.manifest_dir)) == manifests_before  # cleaned up
    commit.abort(messages)
    catalog.close()


def test_catalog_passes_its_lock_to_tables_and_copies(tmp_path):
    catalog = _catalog(tmp_path, f"sqlite:///{tmp_path}/locks.db")
    table = catalog.get_table("db.t")
    assert table.lock is catalog.lock and table.copy({"scan.snapshot-id": "1"}).lock is table.lock
    local = CatalogFactory.create({"warehouse": str(tmp_path / "wh")})
    assert isinstance(local.lock, NoopLock)
    catalog.close()


def test_lock_key_max_length_is_paimons_key(tmp_path):
    """JdbcCatalogOptions.LOCK_KEY_MAX_LENGTH ('lock-key-max-length', default 255): the width
    of lock_id; a Paimon catalog's option map passes through, and longer lock ids are refused
    before touching the database."""
    lock = lock_from_options({"warehouse": str(tmp_path), "lock.enabled": "true",
                              "lock.uri": f"sqlite:///{tmp_path}/l.db",
                              "lock-key-max-length": "20"})
    assert isinstance(lock, SqlCatalogLock) and lock.lock_id_max_length == 20
    assert lock.lock_id("db", "t") == "jdbc.db.t"
    with pytest.raises(CatalogLockError, match="lock-key-max-length"):
        lock.lock_id("database", "a_long_table")
    assert parse_lock_options({}).lock_key_max_length == 255
    with pytest.raises(OptionError, match="lock-key-max-length"):
        parse_lock_options({"lock-key-max-length": "0"})


def test_expiry_defaults_to_the_acquire_timeout_rounded_as_paimon():
    """JdbcCatalogLock stores acquireTimeout / 1000 (rounded down); so does lakecore unless
    lock-expire-time says otherwise."""
    assert parse_lock_options({"lock-acquire-timeout": "1500 ms"}).expire == timedelta(
        milliseconds=1500)
    lock = SqlCatalogLock("sqlite:////tmp/unused-lakecore-lock.db",
                          acquire_timeout=timedelta(milliseconds=1500))
    assert lock.expire_seconds == 1
