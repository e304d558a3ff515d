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
from tests.faults import committer
from tests.faults.harness import (
    all_files,
    check_history,
    missing_files,
    read_rows,
    run_child,
    snapshot_rows,
    unreferenced_files,
)

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])
USER = "ingest-dag.load.run-2026-11-03"
PUBLISHED = {CrashStep.AFTER_SNAPSHOT_BEFORE_HINT, CrashStep.AFTER_COMMIT}
# what a crash at each step leaves behind, by file-name prefix
LEFTOVER_KINDS = {
    CrashStep.AFTER_DATA_FILES: {"data"},
    CrashStep.AFTER_MANIFESTS: {"data", "manifest"},
    CrashStep.AFTER_MANIFEST_LIST: {"data", "manifest", "manifest-list"},
    CrashStep.AFTER_SNAPSHOT_BEFORE_HINT: set(),
    CrashStep.AFTER_COMMIT: set(),
}


def _kind(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return "manifest-list" if name.startswith("manifest-list-") else name.split("-", 1)[0]


def rows(lo: int, hi: int) -> dict[str, list]:
    return {"id": list(range(lo, hi)), "v": [f"v{i}" for i in range(lo, hi)]}


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
    args = {"catalog": options, "table": "db.t", "user": USER}
    for ident, (lo, hi) in enumerate([(0, 10), (10, 20)], start=1):
        assert committer.main({**args, "identifier": ident, "rows": rows(lo, hi)})[
            "snapshot_ids"] == [ident]
    before, files_before = snapshot_rows(table), all_files(table)

    crashed = run_child("tests.faults.committer",
                        {**args, "identifier": 3, "rows": rows(20, 30)}, crash_at=step)
    assert crashed.killed, crashed.stderr

    # the table after the crash: committed snapshots unchanged, nothing referenced missing
    assert missing_files(table) == set()
    after = snapshot_rows(table)
    assert {sid: after[sid] for sid in before} == before
    expected = read_rows(table, 2) + [{"id": i, "v": f"v{i}"} for i in range(20, 30)]
    expected.sort(key=lambda r: (str(r["id"]), r["v"]))
    if step in PUBLISHED:
        assert table.snapshot_manager.latest_id() == 3  # found without the LATEST hint
        assert after[3] == expected
    else:
        assert table.snapshot_manager.latest_id() == 2
    leftovers = unreferenced_files(table)
    assert leftovers <= all_files(table) - files_before  # only what the dead process wrote
    assert {_kind(p) for p in leftovers} == LEFTOVER_KINDS[step]
    if step is CrashStep.AFTER_SNAPSHOT_BEFORE_HINT:  # killed inside the catalog lock
        lock = table.lock
        assert isinstance(lock, SqlCatalogLock) and lock.holder("db", "t") is not None

    # the rerun: same user and identifier, same rows, freshly written files
    rerun = committer.main({**args, "identifier": 3, "rows": rows(20, 30)})
    assert rerun["skipped"] == (step in PUBLISHED)
    assert rerun["snapshot_ids"] == ([] if step in PUBLISHED else [3])
    snaps = check_history(table)
    assert [(s.commit_user, s.commit_identifier) for s in snaps] == [(USER, 1), (USER, 2),
                                                                      (USER, 3)]
    assert read_rows(table) == expected  # every row exactly once
    assert unreferenced_files(table) == leftovers  # the rerun left nothing of its own
    assert missing_files(table) == set()
    assert isinstance(table.lock, SqlCatalogLock)
    table.lock.close()
