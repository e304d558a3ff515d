"""Kill a committer (SIGKILL) at each step of a commit; the table must not notice.

(The commit steps in detail; ``test_crash_matrix`` runs every step of every operation.)

After each crash: every committed snapshot reads as before, nothing referenced is missing,
and the only leftovers are files the dead process wrote that no snapshot references. A rerun
with the same commit user and identifier then completes and commits nothing twice.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakecore import CatalogFactory, Schema
from lakecore.lock import SqlCatalogLock
from lakecore.table import FileStoreTable
from lakecore.utils.faults import CrashStep
from tests.faults.committer_crash import LEFTOVER_KINDS, kill_committer_then_rerun
from tests.faults.harness import missing_files

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])


def catalog_options(tmp_path: Path) -> dict[str, str]:
    # lock in its own SQLite file; a 1 s expiry so a holder killed under the lock is taken
    # over quickly by the rerun
    return {"warehouse": str(tmp_path / "wh"), "lock.enabled": "true",
            "lock.uri": f"sqlite:///{tmp_path}/locks.db", "lock-expire-time": "1 s",
            "lock-acquire-timeout": "60 s", "lock-check-max-sleep": "200 ms"}


def make_table(options: dict[str, str]) -> FileStoreTable:
    catalog = CatalogFactory.create(options)
    catalog.create_database("db", ignore_if_exists=True)
    catalog.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA))
    return catalog.get_table("db.t")


@pytest.mark.slow
@pytest.mark.parametrize("step", list(LEFTOVER_KINDS), ids=lambda s: s.value)
def test_crash_at_each_commit_step_then_rerun(tmp_path, step):
    options = catalog_options(tmp_path)
    table = make_table(options)

    def lock_still_held(table: FileStoreTable) -> None:
        if step is CrashStep.AFTER_SNAPSHOT_BEFORE_HINT:  # killed inside the catalog lock
            lock = table.lock
            assert isinstance(lock, SqlCatalogLock) and lock.holder("db", "t") is not None

    kill_committer_then_rerun(table, options, step, lock_still_held)
    assert missing_files(table) == set()
    assert isinstance(table.lock, SqlCatalogLock)
    table.lock.close()
