"""Four processes committing small APPENDs to one table through the catalog lock.

Afterwards the history must be linear (contiguous ids, each snapshot built on the one before),
no (commit user, identifier) may appear twice, and every written row must read back exactly
once. The table is append-only, so a commit applied twice would show as duplicate rows.
"""

from __future__ import annotations

import multiprocessing
from collections import Counter

import pyarrow as pa
import pytest

from lakecore import CatalogFactory, Schema
from tests.faults.harness import check_history, missing_files, read_rows
from tests.lock import workers
from tests.lock.backends import unique_key

PROCESSES, COMMITS, ROWS = 4, 20, 3
SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("writer", pa.string())])
_fork = multiprocessing.get_context("fork")


@pytest.mark.slow
def _run_ingest_processes(options: dict, table: str) -> list[str]:
    """PROCESSES forked ingest processes (each builds its own catalog, lock and engine after
    the fork) committing COMMITS times each to ``table``; returns their commit users."""
    users = [f"ingest-{i}" for i in range(PROCESSES)]
    procs = [_fork.Process(target=workers.commit, args=({
        "catalog": options, "table": table, "user": user, "n": COMMITS, "rows": ROWS,
        "base": i * 1_000_000},)) for i, user in enumerate(users)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
    assert [p.exitcode for p in procs] == [0] * PROCESSES
    return users


def test_four_processes_commit_through_the_lock(lock_url, tmp_path):
    options = {"warehouse": str(tmp_path / "wh"), "lock.enabled": "true", "lock.uri": lock_url,
               "catalog-key": unique_key(), "lock-check-max-sleep": "100 ms"}
    catalog = CatalogFactory.create(options)
    catalog.create_database("db")
    # lost races are expected here; a shorter retry cap keeps the test short, not simpler
    catalog.create_table("db.t", Schema.from_pyarrow_schema(
        SCHEMA, options={"commit.max-retry-wait": "500 ms"}))
    users = _run_ingest_processes(options, "db.t")

    table = catalog.get_table("db.t")
    snaps = check_history(table)  # contiguous, linear, no (user, identifier) twice
    assert len(snaps) == PROCESSES * COMMITS
    per_user = Counter(s.commit_user for s in snaps)
    assert per_user == {u: COMMITS for u in users}
    for user in users:  # each committer's identifiers, in its own order
        assert [s.commit_identifier for s in snaps if s.commit_user == user] == list(
            range(1, COMMITS + 1))
    rows = read_rows(table)
    ids = Counter(r["id"] for r in rows)
    expected = {i * 1_000_000 + ident * 10 + k for i in range(PROCESSES)
                for ident in range(1, COMMITS + 1) for k in range(ROWS)}
    assert set(ids) == expected and max(ids.values()) == 1
    assert missing_files(table) == set()
    catalog.close()


def _compactor(options: dict, stop_file: str) -> None:
    import os
    import time

    from lakecore import CatalogFactory
    from lakecore.errors import CommitTimeoutError

    table = CatalogFactory.create(options).get_table("db.pk")
    while not os.path.exists(stop_file):
        try:
            table.compact()  # a COMPACT never conflicts with new level-0 files...
        except CommitTimeoutError:
            pass  # ...but may lose every race to four busy ingesters; its files are deleted
        time.sleep(0.05)
    table.compact(full=True)


@pytest.mark.slow
def test_four_ingest_processes_and_a_compactor_through_the_lock(lock_url, tmp_path):
    options = {"warehouse": str(tmp_path / "wh"), "lock.enabled": "true", "lock.uri": lock_url,
               "catalog-key": unique_key(), "lock-check-max-sleep": "100 ms"}
    catalog = CatalogFactory.create(options)
    catalog.create_database("db")
    catalog.create_table("db.pk", Schema.from_pyarrow_schema(
        SCHEMA, primary_keys=["id"], options={
            "bucket": "2", "write-only": "true", "num-sorted-run.compaction-trigger": "3",
            "commit.max-retry-wait": "500 ms"}))
    stop = str(tmp_path / "stop")
    compactor = _fork.Process(target=_compactor, args=(options, stop))
    compactor.start()
    try:
        _run_ingest_processes(options, "db.pk")
    finally:
        open(stop, "w").close()
        compactor.join(300)
    assert compactor.exitcode == 0

    table = catalog.get_table("db.pk")
    snaps = check_history(table)
    kinds = Counter(s.commit_kind.value for s in snaps)
    assert kinds["APPEND"] == PROCESSES * COMMITS and kinds["COMPACT"] >= 1
    rows = read_rows(table)
    ids = Counter(r["id"] for r in rows)
    expected = {i * 1_000_000 + ident * 10 + k for i in range(PROCESSES)
                for ident in range(1, COMMITS + 1) for k in range(ROWS)}
    assert set(ids) == expected and max(ids.values()) == 1
    assert missing_files(table) == set()
    catalog.close()
