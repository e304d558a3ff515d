"""Commit rules where lakecore follows Paimon (issue 15, items 1, 2, 4 and 7).

Each test names the Paimon rule it mirrors and states Paimon's expected outcome; expected
values are written out, never computed by the code under test.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

import pyarrow as pa
import pytest

from lakecore.commit.file_store_commit import FileStoreCommit
from lakecore.commit.message import CommitMessage
from lakecore.errors import (
    BucketCountConflict,
    CommittableFilesMissingError,
    CommitTimeoutError,
    ConcurrentDeleteConflict,
    FileAlreadyAddedConflict,
    PartitionExpiredError,
    UnsortedCommittablesError,
)
from lakecore.format.manifest import FileKind
from lakecore.maintenance import expire_partitions
from lakecore.maintenance.retention import ExpireConfig
from lakecore.store.commit_users import CommitUserIndex
from lakecore.table import FileStoreTable
from lakecore.utils import faults
from tests.core.helpers import make_table, read, table_files, write

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.int64())])


def table(tmp_path, **opts: str) -> FileStoreTable:
    return make_table(str(tmp_path / "wh"), SCHEMA, primary_keys=["dt", "id"],
                      partition_keys=["dt"], options={"bucket": "1", **opts})


def data(ids: list[int], dt: str, v: int) -> pa.Table:
    return pa.table({"id": ids, "dt": [dt] * len(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def rows(t: FileStoreTable) -> dict[int, int]:
    return {r["id"]: r["v"] for r in read(t)}


def adds_in_manifests(t: FileStoreTable) -> dict[str, int]:
    """How many ADD entries name each file in the latest snapshot's manifests."""
    snap = t.snapshot_manager.latest()
    assert snap is not None
    mio = t.manifest_io()
    metas = (mio.read_manifest_list(snap.base_manifest_list)
             + mio.read_manifest_list(snap.delta_manifest_list))
    out: dict[str, int] = {}
    for e in mio.read_entries(metas):
        if e.kind is FileKind.ADD:
            out[e.file.file_name] = out.get(e.file.file_name, 0) + 1
    return out


def expire_all_but_latest(t: FileStoreTable) -> None:
    later = datetime.now() + timedelta(days=1)
    t.expire_snapshots(dry_run=False, now=later,
                       config=ExpireConfig(1, 1, timedelta(0), 1000))


# -- item 1: filterCommitted, replays after expiry, "cannot recover from this checkpoint" --
def test_identifiers_at_or_below_the_latest_committed_are_committed(tmp_path):
    """Paimon FileStoreCommitImpl.filterCommitted: a committable whose identifier is <= the
    commit user's latest committed identifier is committed. Expected: of 1..5 after
    committing 2 and 3, only 4 and 5 remain."""
    t = table(tmp_path)
    sb = t.new_stream_write_builder().with_commit_user("job")
    w = sb.new_write()
    c = sb.new_commit()
    for ident in (2, 3):
        w.write_arrow(data([ident], "a", ident))
        c.commit(w.prepare_commit(ident), ident)
    assert c.filter_committed([1, 2, 3, 4, 5]) == [4, 5]


def test_replay_after_expiry_commits_nothing(tmp_path):
    """Paimon StoreCommitter / TableCommitImpl.filterAndCommit: a restarted writer replays its
    old committables; every one at or below the user's latest identifier is filtered, even
    once the user's snapshots expired (Paimon's FileStoreCommitTest
    .testFilterCommittedAfterExpire; lakecore remembers the identifier in the commit-user
    marker). Expected: nothing is committed, no file is deleted, the table reads the same."""
    t = table(tmp_path)
    sb = t.new_stream_write_builder().with_commit_user("job")
    w = sb.new_write()
    c = sb.new_commit()
    kept: dict[int, list[CommitMessage]] = {}
    for ident in (1, 2, 3):
        w.write_arrow(data([ident, 10], "a", ident))
        kept[ident] = w.prepare_commit(ident)
        c.commit(kept[ident], ident)
    for v in range(3):  # other writers, then expiry drops every snapshot of "job"
        write(t, data([20 + v], "a", v))
    t.compact(full=True)
    expire_all_but_latest(t)
    assert all(s.commit_user != "job" for s in t.snapshot_manager.snapshots())
    before_files, before_rows = table_files(t), rows(t)
    latest = t.snapshot_manager.latest_id()

    restarted = t.new_stream_write_builder().with_commit_user("job").new_commit()
    assert restarted.filter_committed([1, 2, 3, 4]) == [4]
    assert restarted.filter_and_commit(kept) == 0
    for ident, msgs in kept.items():
        assert restarted.commit(msgs, ident).skipped
    assert t.snapshot_manager.latest_id() == latest
    assert table_files(t) == before_files
    assert rows(t) == before_rows == {1: 1, 2: 2, 3: 3, 10: 3, 20: 0, 21: 1, 22: 2}


def test_replay_whose_files_are_gone_is_refused_and_changes_nothing(tmp_path):
    """Paimon TableCommitImpl.checkFilesExistence ("Cannot recover from this checkpoint
    because some files in the snapshot that need to be resubmitted have been deleted"),
    as in Paimon's TableCommitTest.testRecoverDeletedFiles: with the user's record gone
    (snapshots expired, the marker removed), replaying an old committable whose files
    compaction and expiry removed fails with that error. Expected: nothing committed, no
    file deleted, the table reads the same."""
    t = table(tmp_path)
    sb = t.new_stream_write_builder().with_commit_user("job")
    w = sb.new_write()
    c = sb.new_commit()
    w.write_arrow(data([1, 2], "a", 1))
    old = w.prepare_commit(1)
    c.commit(old, 1)
    write(t, data([3], "a", 1))
    t.compact(full=True)  # rewrites job's file away
    expire_all_but_latest(t)  # ... and expiry deletes it
    os.remove(CommitUserIndex(t.file_io, t.paths).path("job"))  # the record is gone too
    before_files, latest = table_files(t), t.snapshot_manager.latest_id()

    restarted = t.new_stream_write_builder().with_commit_user("job").new_commit()
    with pytest.raises(CommittableFilesMissingError,
                       match="Cannot recover from this checkpoint") as err:
        restarted.filter_and_commit({1: old})
    assert err.value.paths and all(p.endswith(".parquet") for p in err.value.paths)
    with pytest.raises(CommittableFilesMissingError):
        restarted.commit(old, 1)
    assert t.snapshot_manager.latest_id() == latest
    assert table_files(t) == before_files
    assert rows(t) == {1: 1, 2: 1, 3: 1}


def test_filter_and_commit_as_paimon_recover_deleted_files(tmp_path):
    """Paimon TableCommitTest.testRecoverDeletedFiles: commit 0 committed, then the new files
    of commits 0 and 1 deleted; filterAndCommit({0}) is fine (filtered), filterAndCommit({1})
    fails with "Cannot recover from this checkpoint"."""
    t = table(tmp_path)
    sb = t.new_stream_write_builder().with_commit_user("u")
    w = sb.new_write()
    w.write_arrow(data([1], "a", 1))
    m0 = w.prepare_commit(0)
    w.write_arrow(data([2], "a", 2))
    m1 = w.prepare_commit(1)
    c = sb.new_commit()
    c.commit(m0, 0)
    for m in (m0[0], m1[0]):
        os.remove(t.paths.data_file_path(m.partition, m.bucket, m.new_files[0].file_name))
    assert c.filter_and_commit({0: m0}) == 0
    with pytest.raises(CommittableFilesMissingError, match="Cannot recover from this checkpoint"):
        c.filter_and_commit({1: m1})
    assert t.snapshot_manager.latest_id() == 1


def test_a_rolled_back_commit_is_not_remembered(tmp_path):
    """Paimon's rollback deletes the snapshots, so latestSnapshotOfUser no longer finds the
    commit and a rerun commits it again. Expected: the marker's record of a rolled-back
    snapshot is ignored; the rerun lands."""
    from lakecore.maintenance import rollback_to

    t = table(tmp_path)
    write(t, data([1], "a", 1))
    sb = t.new_stream_write_builder().with_commit_user("job")
    w = sb.new_write()
    w.write_arrow(data([2], "a", 2))
    msgs = w.prepare_commit(5)
    assert sb.new_commit().commit(msgs, 5).snapshot_ids == (2,)
    rollback_to(t, snapshot_id=1, dry_run=False)
    w2 = sb.new_write()
    w2.write_arrow(data([2], "a", 2))
    assert sb.new_commit().commit(w2.prepare_commit(5), 5).snapshot_ids == (2,)
    assert rows(t) == {1: 1, 2: 2}


# -- item 2: the same file added twice --------------------------------------------------
def test_the_same_messages_committed_again_are_refused(tmp_path):
    """Paimon FileEntry.mergeEntries via the commit's conflict check: "Trying to add file %s
    which is already added" (a file-deletion conflict). Expected: fresh commit users committing
    the same messages a second and third time are refused, no file is deleted (they are
    live), the manifests hold one ADD per file and the rows are counted once."""
    t = make_table(str(tmp_path / "wh"), SCHEMA, partition_keys=["dt"],
                   options={"bucket": "2", "bucket-key": "id"})  # append-only: duplicates show
    wb = t.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(data([1, 2, 3], "a", 1))
    msgs = w.prepare_commit()
    assert wb.new_commit().commit(msgs).snapshot_ids == (1,)
    files = table_files(t)
    for _ in range(2):
        with pytest.raises(FileAlreadyAddedConflict, match="which is already added") as err:
            t.new_batch_write_builder().new_commit().commit(msgs)
        assert set(err.value.files) == {f.file_name for m in msgs for f in m.new_files}
    assert t.snapshot_manager.latest_id() == 1
    assert table_files(t) == files
    assert set(adds_in_manifests(t).values()) == {1}
    assert sorted(r["id"] for r in read(t)) == [1, 2, 3]


def test_a_duplicate_of_an_appended_and_compacted_commit_is_refused(tmp_path):
    """The APPEND of messages whose compaction already replaced their new files: the new files
    are no longer live, but the compaction's output is, so the messages were committed.
    Expected (Paimon: the compaction's ADD "is already added"): refused before the APPEND,
    nothing committed, no file deleted, every key once."""
    t = table(tmp_path, **{"num-sorted-run.compaction-trigger": "2"})
    write(t, data([1, 2], "a", 1))
    wb = t.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(data([2, 3], "a", 2))
    msgs = w.prepare_commit()
    assert any(m.compact_after for m in msgs), "the writer compacted inline"
    assert len(wb.new_commit().commit(msgs).snapshot_ids) == 2
    files, latest = table_files(t), t.snapshot_manager.latest_id()
    with pytest.raises(FileAlreadyAddedConflict):
        FileStoreCommit(t, "other", fresh_user=True).commit(msgs)
    assert t.snapshot_manager.latest_id() == latest
    assert table_files(t) == files
    assert rows(t) == {1: 1, 2: 2, 3: 2}


# -- item 4: the data landed, only the inline compaction lost the race -------------------
def test_lost_inline_compaction_is_dropped_and_the_commit_succeeds(tmp_path):
    """Two writers of one bucket, inline compaction on: writer B's APPEND lands after writer
    A compacted the files B's compaction also rewrote. Paimon's commit would fail B's COMPACT
    ("File deletion conflicts detected"); its data is committed by then. Expected: B's commit
    returns its APPEND snapshot with compaction_dropped, B's compaction output files are
    deleted, and every row of both writers is read."""
    t = table(tmp_path, **{"num-sorted-run.compaction-trigger": "2"})
    write(t, data([1, 2], "a", 0))
    a, b = t.new_batch_write_builder(), t.new_batch_write_builder()
    wa, wbr = a.new_write(), b.new_write()
    wa.write_arrow(data([1, 3], "a", 1))
    wbr.write_arrow(data([2, 4], "a", 2))
    ma, mb = wa.prepare_commit(), wbr.prepare_commit()
    assert any(m.compact_before for m in mb), "B compacted inline"
    ra = a.new_commit().commit(ma)
    assert len(ra.snapshot_ids) == 2 and not ra.compaction_dropped
    rb = b.new_commit().commit(mb)
    assert len(rb.snapshot_ids) == 1 and rb.compaction_dropped
    assert rb.dropped_reason and "no longer live" in rb.dropped_reason
    produced = {f.file_name for m in mb for f in m.compacted_files()}
    on_disk = {p.rsplit("/", 1)[-1] for p in table_files(t)}
    assert produced and not produced & on_disk
    assert {f.file_name for m in mb for f in m.new_files} <= on_disk
    assert rows(t) == {1: 1, 2: 2, 3: 1, 4: 2}


# -- item 7: bucket rescale --------------------------------------------------------------
def test_overwrite_with_another_bucket_count_rescales(tmp_path):
    """Paimon's rescale (ALTER bucket, then INSERT OVERWRITE): the conflict check skips the
    bucket count for an OVERWRITE (FileStoreCommitImpl.noConflictsOrFail). Expected: the
    overwrite with 4 buckets lands and replaces the partition; appends with 4 buckets follow;
    an append with the old count 2 is refused ("changed from 4 to 2 without overwrite")."""
    t = table(tmp_path, bucket="2")
    write(t, data(list(range(8)), "a", 1), data([1], "b", 1))
    t4 = t.copy({"bucket": "4"})
    write(t4, data(list(range(8)), "a", 2), overwrite={"dt": "a"})
    write(t4, data([9], "a", 3))
    assert {r["id"]: r["v"] for r in read(t) if r["dt"] == "a"} == {
        0: 2, 1: 2, 2: 2, 3: 2, 4: 2, 5: 2, 6: 2, 7: 2, 9: 3}
    before = t.snapshot_manager.latest_id()
    with pytest.raises(BucketCountConflict, match="changed from 4 to 2 without overwrite"):
        write(t, data([10], "a", 4))
    assert t.snapshot_manager.latest_id() == before
    # partition b was not rescaled: it keeps its 2 buckets
    write(t, data([2], "b", 2))
    assert {r["id"]: r["v"] for r in read(t) if r["dt"] == "b"} == {1: 1, 2: 2}


def test_files_without_a_recorded_bucket_count_take_no_part(tmp_path):
    """Paimon's bucket check skips files whose totalBuckets <= 0 (written before it was
    recorded). Expected: an append with 2 buckets over such files lands; a later append with
    4 buckets is then refused by the 2-bucket files."""
    t = table(tmp_path, bucket="2")
    w = t.new_batch_write_builder().new_write()
    w.write_arrow(data([1], "a", 1))
    unset = [CommitMessage(m.partition, m.bucket, 0, new_files=m.new_files)
             for m in w.prepare_commit()]
    FileStoreCommit(t, "old-writer", fresh_user=True).commit(unset)
    write(t, data([2], "a", 2))
    assert rows(t) == {1: 1, 2: 2}
    with pytest.raises(BucketCountConflict, match="changed from 2 to 4"):
        write(t.copy({"bucket": "4"}), data([3], "a", 3))


# -- item 3: a transient I/O error on the snapshot write ----------------------------------
@pytest.mark.parametrize("step", [faults.IOFaultStep.SNAPSHOT_BEFORE_CREATE,
                                  faults.IOFaultStep.SNAPSHOT_AFTER_CREATE])
def test_transient_io_error_on_the_snapshot_write_is_retried(tmp_path, monkeypatch, step):
    """Paimon FileStoreCommitImpl.tryCommitOnce: an exception while committing the snapshot
    means "commit may have succeeded"; the next attempt first looks for our snapshot. Expected:
    the commit returns normally (no OSError) with exactly one new snapshot, built on the one
    before, whose manifests all exist, and the rows read back once."""
    t = table(tmp_path)
    write(t, data([1], "a", 1))
    monkeypatch.setenv(faults.IO_ERROR_ENV_VAR, step.value)
    monkeypatch.setattr(faults, "_io_seen", faults.Counter())
    assert write(t, data([2], "a", 2)) == (2,)
    monkeypatch.delenv(faults.IO_ERROR_ENV_VAR)
    assert faults._io_seen[step.value] >= 1, "the fault fired"
    assert t.snapshot_manager.list_ids() == [1, 2]
    snap = t.snapshot_manager.snapshot(2)
    mio = t.manifest_io()
    for name in (snap.base_manifest_list, snap.delta_manifest_list):
        for meta in mio.read_manifest_list(name):  # raises if a manifest is missing
            mio.read_entries([meta])
    assert rows(t) == {1: 1, 2: 2}
    write(t, data([3], "a", 3))  # the next commit builds on it
    assert rows(t) == {1: 1, 2: 2, 3: 3}


# -- issue 35's small differences --------------------------------------------------------------
def test_retry_waits_are_paimons_base_to_1_2x_base() -> None:
    """Paimon's RetryWaiter.retryWait(retryCount): min(min-wait * 2^retryCount, max-wait) ms
    plus a jitter in [0, max(1, 20 %)) ms. Bases for 10 ms / 200 ms, written out."""
    import random

    from lakecore.commit.file_store_commit import retry_wait_seconds

    bases = [0.010, 0.020, 0.040, 0.080, 0.160, 0.200, 0.200]
    # the jitter is nextInt(max(1, (int) (base_ms * 0.2))) whole milliseconds
    tops = [0.011, 0.023, 0.047, 0.095, 0.191, 0.239, 0.239]
    rng = random.Random(7)
    for count, (base, top) in enumerate(zip(bases, tops, strict=True)):
        waits = [retry_wait_seconds(timedelta(milliseconds=10), timedelta(milliseconds=200),
                                    count, rng) for _ in range(400)]
        assert all(base <= w < base * 1.2 for w in waits), (count, min(waits), max(waits))
        assert min(waits) == base  # the jitter starts at 0 ms
        assert max(waits) == pytest.approx(top)  # ...and spreads over the 20 %
    # a base below 5 ms still gets Paimon's jitter of nextInt(1) = 0 ms: exactly the base
    assert retry_wait_seconds(timedelta(milliseconds=3), timedelta(seconds=1), 0, rng) == 0.003


def test_a_lost_race_waits_paimons_backoff_between_attempts(tmp_path) -> None:
    t = table(tmp_path, **{"commit.max-retries": "3", "commit.min-retry-wait": "10 ms",
                           "commit.max-retry-wait": "30 ms"})
    wb = t.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(data([1], "a", 1))
    waits: list[float] = []
    commit = FileStoreCommit(t, "racer", sleep=waits.append)
    commit._publish = lambda latest, snapshot: False  # another committer always wins
    with pytest.raises(CommitTimeoutError, match="4 attempts"):
        commit.commit(w.prepare_commit())
    # three waits before the second, third and fourth attempts: 10, 20, then 30 (the cap) ms
    assert len(waits) == 3
    for got, base in zip(waits, (0.010, 0.020, 0.030), strict=True):
        assert base <= got < base * 1.2


def test_unsorted_committables_are_refused_before_filtering(tmp_path) -> None:
    """Paimon's FileStoreCommitImpl.filterCommitted: "Committables must be sorted according
    to identifiers before filtering" (identifiers strictly increasing)."""
    t = table(tmp_path)
    commit = t.new_stream_write_builder().with_commit_user("u").new_commit()
    assert commit.filter_committed([1, 2, 5]) == [1, 2, 5]
    for bad in ([2, 1], [1, 3, 3], [4, 1, 2]):
        with pytest.raises(UnsortedCommittablesError, match="must be sorted") as err:
            commit.filter_committed(bad)
        assert err.value.identifiers == tuple(bad)
    # filter_and_commit takes a mapping and sorts it itself, as Paimon's filterAndCommit does
    w = t.new_stream_write_builder().with_commit_user("u").new_write()
    w.write_arrow(data([1], "a", 1))
    m2 = w.prepare_commit(2)
    w.write_arrow(data([2], "a", 2))
    m5 = w.prepare_commit(5)
    assert commit.filter_and_commit({5: m5, 2: m2}) == 2
    assert [s.commit_identifier for s in t.snapshot_manager.snapshots()] == [2, 5]


def _delete_only(t: FileStoreTable, dt: str) -> list[CommitMessage]:
    """A compaction's message that removes the live files of ``dt`` and writes nothing."""
    snap = t.snapshot_manager.latest()
    assert snap is not None
    mio = t.manifest_io()
    live = [e for e in mio.read_entries(mio.read_manifest_list(snap.base_manifest_list)
                                        + mio.read_manifest_list(snap.delta_manifest_list))
            if e.kind is FileKind.ADD]
    files = tuple(e.file for e in live if t.partition_codec.decode(e.partition) == (dt,))
    assert files
    return [CommitMessage((dt,), 0, 1, compact_before=files)]


def test_a_delete_only_commit_into_an_expired_partition_names_the_expiry(tmp_path) -> None:
    """Paimon's ConflictDetection.checkConflictForPartitionExpire: when every file a commit
    deletes that is no longer live lies in an expired partition, the error says the partition
    expired ("You are writing data to expired partitions ..."), not "File deletion
    conflicts"; the table is left as it was."""
    t = table(tmp_path, **{"write-only": "true", "partition.expiration-time": "2 d",
                           "partition.timestamp-formatter": "yyyyMMdd"})
    write(t, data([1, 2], "20230101", 1))
    write(t, data([3], "20230105", 1))
    stale = _delete_only(t, "20230101")  # planned before the expiry
    expire_partitions(t, now=datetime(2023, 1, 5), dry_run=False)
    before = t.snapshot_manager.latest_id()
    with pytest.raises(PartitionExpiredError, match="20230101") as err:
        FileStoreCommit(t, "compactor").commit(stale)
    assert isinstance(err.value.__cause__, ConcurrentDeleteConflict)
    assert t.snapshot_manager.latest_id() == before
    assert rows(t) == {3: 1}


def test_a_delete_conflict_in_a_live_partition_stays_a_conflict(tmp_path) -> None:
    """The same lost race in a partition within the retention (today's) is a file deletion
    conflict, as in Paimon: only all-expired deletes are reported as expiry."""
    today = datetime.now().strftime("%Y%m%d")
    t = table(tmp_path, **{"write-only": "true", "partition.expiration-time": "2 d",
                           "partition.timestamp-formatter": "yyyyMMdd"})
    write(t, data([3], today, 1))
    stale = _delete_only(t, today)
    write(t, data([3], today, 2), overwrite={"dt": today})  # its files replaced meanwhile
    with pytest.raises(ConcurrentDeleteConflict):
        FileStoreCommit(t, "compactor").commit(stale)
    assert rows(t) == {3: 2}
