"""The commit-user index: idempotence lookups that do not read the table's history.

A rerun of an Airflow run (one commit user per run) must find its own snapshot; a new run must
not read every snapshot back to the earliest to learn that it has not committed yet. The tests
prove the bound by making old snapshots unreadable: a lookup that touched them would fail.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

import pyarrow as pa

from lakecore.commit.file_store_commit import FileStoreCommit
from lakecore.maintenance import remove_orphan_files, rollback_to
from lakecore.store.commit_users import CommitUserIndex
from lakecore.table import FileStoreTable
from tests.core.helpers import make_table, read, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.int64())])


def table(tmp_path) -> FileStoreTable:
    return make_table(str(tmp_path), SCHEMA, primary_keys=["id"],
                      options={"bucket": "1", "write-only": "true"})


def commit_as(t: FileStoreTable, user: str, ident: int, ids: list[int], v: int):
    sb = t.new_stream_write_builder().with_commit_user(user)
    w = sb.new_write()
    w.write_arrow(pa.table({"id": ids, "v": [v] * len(ids)}, schema=SCHEMA))
    msgs = w.prepare_commit(ident)
    result = sb.new_commit().commit(msgs, ident)
    if result.skipped:
        sb.new_commit().abort(msgs)
    w.close()
    return result


def break_snapshots(t: FileStoreTable, ids: range) -> None:
    """Truncate snapshot files: any read of them raises CorruptFileError."""
    for sid in ids:
        with open(t.paths.snapshot_path(sid), "r+b") as f:
            f.truncate(5)
    t.snapshot_manager._cache.clear()


def test_a_new_user_commits_without_reading_history(tmp_path):
    t = table(tmp_path)
    for i in range(30):
        commit_as(t, f"run-{i}", 1, [i], i)
    break_snapshots(t, range(1, 30))  # only the latest snapshot stays readable
    result = commit_as(t, "run-new", 1, [100], 100)
    assert result.snapshot_ids == (31,) and not result.skipped
    # and its rerun finds it, reading only what came after its marker
    assert commit_as(t, "run-new", 1, [100], 999).skipped
    assert t.snapshot_manager.latest_id() == 31


def test_rerun_of_an_old_run_finds_its_snapshot_after_much_history(tmp_path):
    t = table(tmp_path)
    first = commit_as(t, "run-2026-11-01", 20261101, [1], 1)
    for i in range(40):
        commit_as(t, f"run-other-{i}", 1, [2], i)
    assert commit_as(t, "run-2026-11-01", 20261101, [1], 99).skipped
    assert read(t, "id")[0] == {"id": 1, "v": 1}
    marker = CommitUserIndex(t.file_io, t.table_path).read("run-2026-11-01")
    assert marker is not None and marker.after_snapshot_id == first.snapshot_ids[0] - 1


def test_batch_builders_write_no_markers(tmp_path):
    t = table(tmp_path)
    for i in range(3):
        write(t, {"id": [i], "v": [i]})
    assert t.file_io.list_status(CommitUserIndex(t.file_io, t.table_path).dir) == []


def test_rollback_below_the_marker_lowers_it(tmp_path):
    t = table(tmp_path)
    for i in range(5):
        commit_as(t, f"before-{i}", 1, [i], i)
    assert commit_as(t, "run-x", 1, [10], 1).snapshot_ids == (6,)  # marker: after 5
    rollback_to(t, snapshot_id=3, dry_run=False)
    # run-x's commit is gone: its rerun commits again (on top of snapshot 3)
    assert commit_as(t, "run-x", 1, [10], 2).snapshot_ids == (4,)
    marker = CommitUserIndex(t.file_io, t.table_path).read("run-x")
    assert marker is not None and marker.after_snapshot_id == 3
    assert commit_as(t, "run-x", 1, [10], 3).skipped  # found below the old marker
    assert {r["id"]: r["v"] for r in read(t)} == {0: 0, 1: 1, 2: 2, 10: 2}


def test_tables_without_markers_fall_back_to_the_full_walk(tmp_path):
    t = table(tmp_path)
    commit_as(t, "legacy-run", 5, [1], 1)
    for i in range(3):
        write(t, {"id": [2], "v": [i]})
    index = CommitUserIndex(t.file_io, t.table_path)
    for st in t.file_io.list_status(index.dir):
        os.remove(st.path)
    os.rmdir(index.dir)  # as a table written before the index existed
    assert FileStoreCommit(t, "legacy-run").is_committed(5)
    assert not FileStoreCommit(t, "legacy-run").is_committed(6)


def test_corrupt_marker_means_a_full_walk_not_a_failure(tmp_path):
    t = table(tmp_path)
    commit_as(t, "run-a", 1, [1], 1)
    commit_as(t, "run-b", 1, [2], 1)
    index = CommitUserIndex(t.file_io, t.table_path)
    with open(index.path("run-a"), "wb") as f:
        f.write(b"{not json")
    assert FileStoreCommit(t, "run-a").is_committed(1)
    assert commit_as(t, "run-a", 1, [1], 5).skipped


def test_orphan_removal_drops_markers_of_users_without_snapshots(tmp_path):
    t = table(tmp_path)
    commit_as(t, "gone", 1, [1], 1)
    commit_as(t, "kept", 1, [2], 1)
    rollback_to(t, snapshot_id=1, dry_run=False)  # snapshot 2 (by "kept") is gone
    index = CommitUserIndex(t.file_io, t.table_path)
    future = datetime.now() + timedelta(seconds=2)
    report = remove_orphan_files(t, older_than=timedelta(0), now=future, dry_run=False)
    removed = {f.path for f in report.files}
    assert index.path("kept") in removed  # its only snapshot was rolled back
    assert index.path("gone") not in removed  # snapshot 1 is still its
    # a removed marker is harmless: its user has no snapshot, so a rerun commits again
    assert commit_as(t, "kept", 1, [2], 7).snapshot_ids == (2,)
    assert commit_as(t, "kept", 1, [2], 8).skipped
