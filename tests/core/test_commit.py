"""Commit semantics: overwrite, idempotence, abort, conflicts, retries, manifest merging."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from lakecore.commit.file_store_commit import FileStoreCommit
from lakecore.commit.message import CommitMessage
from lakecore.errors import (
    BucketCountConflict,
    CommitTimeoutError,
    ConcurrentDeleteConflict,
)
from lakecore.format.snapshot import CommitKind
from tests.core.helpers import make_table, read, table_files, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("dt", pa.string(), False),
                    ("v", pa.int64())])


def table(tmp_path, **opts):
    return make_table(str(tmp_path), SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                      options={"bucket": "2", **opts})


def data(ids, dt, v):
    return pa.table({"id": ids, "dt": [dt] * len(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def test_static_partition_overwrite_replaces_only_that_partition(tmp_path):
    t = table(tmp_path)
    write(t, data([1, 2, 3], "a", 1), data([1, 2], "b", 1))
    (sid,) = write(t, data([9], "a", 2), overwrite={"dt": "a"})
    assert t.snapshot_manager.snapshot(sid).commit_kind is CommitKind.OVERWRITE
    assert [(r["dt"], r["id"], r["v"]) for r in read(t, ["dt", "id"])] == [
        ("a", 9, 2), ("b", 1, 1), ("b", 2, 1)]


def test_static_overwrite_rejects_rows_of_other_partitions(tmp_path):
    t = table(tmp_path)
    write(t, data([1], "a", 1))
    with pytest.raises(Exception, match="does not belong"):
        write(t, data([1], "b", 2), overwrite={"dt": "a"})
    assert [r["dt"] for r in read(t)] == ["a"]


def test_dynamic_overwrite_replaces_partitions_present_in_data(tmp_path):
    t = table(tmp_path)
    write(t, data([1, 2], "a", 1), data([1, 2], "b", 1))
    write(t, data([5], "b", 3), overwrite={})
    assert [(r["dt"], r["id"]) for r in read(t, ["dt", "id"])] == [("a", 1), ("a", 2), ("b", 5)]


def test_overwrite_whole_table_when_dynamic_disabled(tmp_path):
    t = table(tmp_path, **{"dynamic-partition-overwrite": "false"})
    write(t, data([1, 2], "a", 1), data([1, 2], "b", 1))
    write(t, data([5], "b", 3), overwrite={})
    assert [(r["dt"], r["id"]) for r in read(t, ["dt", "id"])] == [("b", 5)]


def test_recommit_same_identifier_commits_nothing(tmp_path):
    t = table(tmp_path)
    sb = t.new_stream_write_builder().with_commit_user("ingest-run-1")
    w = sb.new_write()
    w.write_arrow(data([1, 2], "a", 1))
    msgs = w.prepare_commit(7)
    c = sb.new_commit()
    first = c.commit(msgs, 7)
    assert len(first.snapshot_ids) == 1 and not first.skipped
    again = sb.new_commit().commit(msgs, 7)
    assert again.skipped and again.snapshot_ids == ()
    assert t.snapshot_manager.latest_id() == first.snapshot_ids[0]
    # Paimon's filterCommitted (FileStoreCommitImpl): every identifier at or below the user's
    # latest committed one counts as committed (out-of-order Airflow reruns use one commit
    # user per run: lakecore.spark.ingest.default_commit_user)
    assert c.filter_committed([6, 7, 8]) == [8]
    assert len(read(t)) == 2


def test_out_of_order_identifier_of_another_user_is_not_mistaken_for_committed(tmp_path):
    t = table(tmp_path)
    for user, ident in (("run-2026-11-02", 2), ("run-2026-11-01", 1)):
        sb = t.new_stream_write_builder().with_commit_user(user)
        w = sb.new_write()
        w.write_arrow(data([ident], "a", ident))
        assert not sb.new_commit().commit(w.prepare_commit(ident), ident).skipped
    assert len(read(t)) == 2


def test_abort_deletes_written_files(tmp_path):
    t = table(tmp_path)
    before = table_files(t)
    wb = t.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(data(list(range(100)), "a", 1))
    msgs = w.prepare_commit()
    assert len(table_files(t)) > len(before)
    wb.new_commit().abort(msgs)
    assert table_files(t) == before


def test_deleting_a_file_that_is_not_live_is_a_named_conflict(tmp_path):
    t = table(tmp_path)
    write(t, data([1], "a", 1))
    split = t.new_read_builder().new_scan().plan().splits()[0]
    f = split.files[0]
    msg = CommitMessage(split.partition, split.bucket, 2, compact_before=(f,))
    FileStoreCommit(t, "compactor-1").commit([msg], 1)
    with pytest.raises(ConcurrentDeleteConflict, match="compactor-2.*no longer live.*compactor-1"):
        FileStoreCommit(t, "compactor-2").commit([msg], 1)
    # the same file name at another level is another file
    moved = CommitMessage(split.partition, split.bucket, 2, compact_before=(f.upgrade(3),))
    write(t, data([1], "a", 1))
    with pytest.raises(ConcurrentDeleteConflict):
        FileStoreCommit(t, "compactor-3").commit([moved], 1)


def test_bucket_count_change_is_a_conflict(tmp_path):
    t = table(tmp_path)
    write(t, data([1], "a", 1))
    other = t.copy({"bucket": "4"})
    before = t.snapshot_manager.latest_id()
    with pytest.raises(BucketCountConflict, match="bucket count"):
        write(other, data([2], "a", 1))
    assert t.snapshot_manager.latest_id() == before


def test_lost_race_is_retried_then_times_out(tmp_path):
    t = table(tmp_path, **{"commit.max-retries": "2", "commit.min-retry-wait": "1 ms",
                           "commit.max-retry-wait": "2 ms"})
    wb = t.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(data([1], "a", 1))
    msgs = w.prepare_commit()
    commit = FileStoreCommit(t, "racer")
    attempts = []

    def always_lose(latest, snapshot):  # another committer always wins
        attempts.append(snapshot.id)
        return False

    commit._publish = always_lose  # the race outcome is what we inject, nothing else
    with pytest.raises(CommitTimeoutError, match="3 attempts"):
        commit.commit(msgs)
    assert len(attempts) == 3
    assert t.snapshot_manager.latest_id() is None
    # manifests of the failed attempts were cleaned up
    assert not [f for f in table_files(t) if f.startswith("manifest/")]


def test_concurrent_snapshot_creation_retries_on_new_latest(tmp_path):
    t = table(tmp_path)
    wb = t.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(data([1], "a", 1))
    msgs = w.prepare_commit()
    commit = FileStoreCommit(t, "slow")
    real = commit._publish
    state = {"first": True}

    def publish(latest, snapshot):
        if state["first"]:  # someone else commits between our read and our create
            state["first"] = False
            write(t, data([2], "b", 2))
        return real(latest, snapshot)

    commit._publish = publish
    (sid,) = commit.commit(msgs).snapshot_ids
    assert sid == 2
    assert sorted(r["id"] for r in read(t)) == [1, 2]


def test_manifests_are_merged_so_planning_tracks_live_files(tmp_path):
    t = table(tmp_path, **{"manifest.merge-min-count": "5"})
    for i in range(30):
        write(t, data([i % 3], "a", i))
    snap = t.snapshot_manager.latest()
    mio = t.manifest_io()
    assert len(mio.read_manifest_list(snap.base_manifest_list)) <= 5
    assert [r["v"] for r in read(t, "id")] == [27, 28, 29]


def test_snapshot_file_is_never_overwritten(tmp_path):
    t = table(tmp_path)
    write(t, data([1], "a", 1))
    snap = t.snapshot_manager.snapshot(1)
    path = t.paths.snapshot_path(1)
    mtime = os.stat(path).st_mtime_ns
    assert not t.snapshot_manager.try_create(snap)
    assert os.stat(path).st_mtime_ns == mtime


def test_batch_commit_called_twice_commits_once(tmp_path):
    t = table(tmp_path)
    wb = t.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(data([1, 2], "a", 1))
    msgs = w.prepare_commit()
    c = wb.new_commit()
    assert len(c.commit(msgs).snapshot_ids) == 1
    assert c.commit(msgs).skipped  # the retry after an unknown outcome finds its snapshot
    assert t.snapshot_manager.latest_id() == 1
