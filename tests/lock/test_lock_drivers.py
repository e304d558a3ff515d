"""The catalog lock under contention on every database driver installed here (issue 34).

Four processes x ten commits to one primary-key table, through a ``lock.uri`` that names the
driver: psycopg 3, psycopg2 (the driver Airflow's own metadata connection names), pg8000 on
PostgreSQL; PyMySQL (and mysqlclient when installed) on MariaDB; SQLite. Lost races are the
normal case here: each is a refused insert that must read as "someone holds the lock", never as
an error. Two kinds of writers: write-only ingest (Paimon's ``write-only``, as the Spark ingest
job writes) and default writers that compact inline (an APPEND and a COMPACT per commit).

Afterwards every commit landed (each user's identifiers 1..10, in order), the history is
contiguous and linear, every row reads back once, and the lock table holds no row of the test.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from lakecore import CatalogFactory, Schema
from lakecore.errors import CatalogLockError, OptionError
from lakecore.lock import SqlCatalogLock
from lakecore.lock.sql import TABLE_NAME
from tests.faults.harness import check_history, missing_files, read_rows
from tests.lock import workers
from tests.lock.backends import installed_lock_backends, lock_backend_url, unique_key
from tests.lock.test_concurrent_commits import PROCESSES, ROWS, _run_ingest_processes

COMMITS = 10
SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("writer", pa.string())])
WRITERS = {
    # Spark's ingest: write-only, level-0 files only, one APPEND per commit
    "write-only": {"bucket": "2", "write-only": "true"},
    # the defaults: every writer compacts its bucket inline (APPEND, then COMPACT)
    "inline-compaction": {"bucket": "1"},
}


@pytest.fixture(params=installed_lock_backends())
def lock_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.slow
@pytest.mark.parametrize("writers", sorted(WRITERS))
def test_four_processes_commit_through_every_driver(lock_backend: str, writers: str,
                                                    tmp_path: Path) -> None:
    url = lock_backend_url(lock_backend, tmp_path)
    key = unique_key()
    options = {"warehouse": str(tmp_path / "wh"), "lock.enabled": "true", "lock.uri": url,
               "catalog-key": key, "lock-check-max-sleep": "100 ms"}
    catalog = CatalogFactory.create(options)
    catalog.create_database("db")
    catalog.create_table("db.pk", Schema.from_pyarrow_schema(
        SCHEMA, primary_keys=["id"],
        options={**WRITERS[writers], "commit.max-retry-wait": "500 ms"}))
    users = _run_ingest_processes(options, "db.pk", workers.upsert, COMMITS,
                                  {"report": str(tmp_path / "report-{i}.json")})

    table = catalog.get_table("db.pk")
    snaps = check_history(table)  # contiguous ids, each on the one before, nothing twice
    appends = [s for s in snaps if s.commit_kind.value == "APPEND"]
    assert len(appends) == PROCESSES * COMMITS
    for user in users:
        assert [s.commit_identifier for s in appends if s.commit_user == user] == list(
            range(1, COMMITS + 1))
    if writers == "inline-compaction":
        assert any(s.commit_kind.value == "COMPACT" for s in snaps)
    else:
        assert {s.commit_kind.value for s in snaps} == {"APPEND"}
    ids = Counter(r["id"] for r in read_rows(table))
    expected = {i * 1_000_000 + ident * 10 + k for i in range(PROCESSES)
                for ident in range(1, COMMITS + 1) for k in range(ROWS)}
    assert set(ids) == expected and max(ids.values()) == 1
    assert missing_files(table) == set()
    catalog.close()

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            left = conn.execute(text(f"SELECT lock_id FROM {TABLE_NAME} WHERE lock_id LIKE :k"),
                                {"k": f"{key}.%"}).fetchall()
    finally:
        engine.dispose()
    assert left == []


@pytest.mark.parametrize(("uri", "says"), [
    ("postgresql+asyncpg://u@h/db", "'asyncpg' (postgresql+asyncpg://) is not supported"),
    ("mysql+mysqlconnector://u@h/db", "use one of mysql+pymysql://, mysql+mysqldb://"),
    ("oracle+oracledb://u@h/db", "'oracle' is not supported"),
])
def test_an_unsupported_driver_is_refused_when_the_catalog_is_created(uri: str, says: str,
                                                                      tmp_path: Path) -> None:
    with pytest.raises(OptionError, match="lock.uri") as err:
        CatalogFactory.create({"warehouse": str(tmp_path / "wh"), "lock.enabled": "true",
                               "lock.uri": uri})
    assert says in str(err.value)
    assert not (tmp_path / "wh").exists()  # nothing made


def test_a_driver_that_is_not_installed_is_named_with_what_to_install(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pg8000", None)  # `import pg8000` raises ImportError
    with pytest.raises(CatalogLockError, match=r"'pg8000' .* is not installed in this Python: "
                                               r"pip install pg8000, or use postgresql\+psycopg://"):
        SqlCatalogLock("postgresql+pg8000://u@h/db")


def test_every_supported_postgres_and_mysql_url_form_is_accepted() -> None:
    from lakecore.lock.options import normalize_lock_uri

    for backend in installed_lock_backends():
        if backend == "sqlite":
            continue
        url = make_url(f"{backend}://u@h/db")
        assert normalize_lock_uri(url.render_as_string()) == f"{backend}://u@h/db"
