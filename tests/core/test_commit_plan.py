"""The pure commit step without I/O: each conflict raises its named subclass, plans are values."""

from __future__ import annotations

import dataclasses

import pytest

from lakecore.commit.plan import (
    bucket_count_suspects,
    is_pure_append,
    merged_base,
    overwrite_changes,
    plan_commit,
)
from lakecore.errors import (
    BucketCountConflict,
    CommitConflictError,
    ConcurrentDeleteConflict,
    LevelOverlapConflict,
)
from lakecore.format.binary_row import encode_row
from lakecore.format.manifest import DataFileMeta, FileKind, ManifestEntry
from lakecore.format.manifest_list import ManifestFileMeta
from lakecore.format.snapshot import CommitKind, Snapshot
from lakecore.format.stats import EMPTY_STATS
from lakecore.schema.types import parse_type

KEY_TYPES = [parse_type("INT NOT NULL")]
PART_TYPES = [parse_type("STRING NOT NULL")]
A, B = encode_row(["a"], PART_TYPES), encode_row(["b"], PART_TYPES)


def file(name: str, lo: int = 0, hi: int = 0, *, level: int = 0, rows: int = 1) -> DataFileMeta:
    return DataFileMeta(name, 100, rows, encode_row([lo], KEY_TYPES), encode_row([hi], KEY_TYPES),
                        EMPTY_STATS, EMPTY_STATS, 0, 0, 0, level)


def add(f: DataFileMeta, partition: bytes = A, bucket: int = 0, buckets: int = 2) -> ManifestEntry:
    return ManifestEntry(FileKind.ADD, partition, bucket, buckets, f)


def delete(f: DataFileMeta, partition: bytes = A, bucket: int = 0,
           buckets: int = 2) -> ManifestEntry:
    return ManifestEntry(FileKind.DELETE, partition, bucket, buckets, f)


def live(*entries: ManifestEntry) -> dict[tuple, ManifestEntry]:
    return {e.identifier(): e for e in entries}


def snapshot(sid: int = 3, total: int | None = 10) -> Snapshot:
    return Snapshot(id=sid, schema_id=0, base_manifest_list="manifest-list-b",
                    delta_manifest_list="manifest-list-d", commit_user="ingest",
                    commit_identifier=1, commit_kind=CommitKind.APPEND, time_millis=0,
                    total_record_count=total or 0, delta_record_count=1)


def plan(kind, changes, current, latest=None, **kw):
    kw.setdefault("commit_user", "compactor-2")
    kw.setdefault("commit_identifier", 7)
    kw.setdefault("schema_id", 0)
    return plan_commit(kind, changes, current, latest, **kw)


def test_deleting_a_file_that_is_not_live_is_a_concurrent_delete_conflict():
    gone = file("data-1.parquet")
    with pytest.raises(ConcurrentDeleteConflict) as info:
        plan(CommitKind.COMPACT, [delete(gone), add(file("data-2.parquet", level=1))],
             live(add(file("data-3.parquet"))), snapshot(), other_users=["compactor-1"])
    err = info.value
    assert isinstance(err, CommitConflictError)
    assert str(err).startswith("file deletion conflict: ")
    assert "compactor-2" in str(err) and "compactor-1" in str(err)
    assert "data-1.parquet (bucket 0, level 0)" in str(err)
    # the same file name at another level is another file
    with pytest.raises(ConcurrentDeleteConflict):
        plan(CommitKind.COMPACT, [delete(gone.upgrade(3))], live(add(gone)), snapshot())


def test_bucket_count_change_is_a_bucket_count_conflict():
    with pytest.raises(BucketCountConflict, match=r"^bucket count conflict: .*'ingest-2'.*4 "
                                                  r"buckets.*written with 2 buckets"):
        plan(CommitKind.APPEND, [add(file("data-2.parquet"), buckets=4)],
             live(add(file("data-1.parquet"), buckets=2)), snapshot(), commit_user="ingest-2")
    # another partition may use another count
    plan(CommitKind.APPEND, [add(file("data-2.parquet"), partition=B, buckets=4)],
         live(add(file("data-1.parquet"), buckets=2)), snapshot())


def test_key_overlap_in_a_level_is_a_level_overlap_conflict():
    current = live(add(file("data-1.parquet", 0, 10, level=1)))
    overlapping = [add(file("data-2.parquet", 5, 20, level=1))]
    with pytest.raises(LevelOverlapConflict, match=r"^level overlap conflict: .*data-1.*data-2"):
        plan(CommitKind.COMPACT, overlapping, current, snapshot(), key_types=KEY_TYPES)
    # only a compaction is checked; a disjoint run is fine
    plan(CommitKind.APPEND, overlapping, current, snapshot(), key_types=KEY_TYPES)
    plan(CommitKind.COMPACT, [add(file("data-2.parquet", 11, 20, level=1))], current,
         snapshot(), key_types=KEY_TYPES)


def test_conflict_kinds_are_classes_not_strings():
    kinds = {c: c.kind for c in (ConcurrentDeleteConflict, BucketCountConflict,
                                 LevelOverlapConflict)}
    assert len(set(kinds.values())) == 3
    assert all(issubclass(c, CommitConflictError) for c in kinds)
    assert str(BucketCountConflict("x")) == "bucket count conflict: x"


def test_append_over_live_files_plans_its_entries_and_snapshot():
    old = add(file("data-1.parquet", rows=10))
    new = [add(file("data-2.parquet", rows=3)), add(file("data-3.parquet", rows=2), bucket=1)]
    log = [add(file("changelog-1.parquet", rows=4))]
    assert is_pure_append(new)
    p = plan(CommitKind.APPEND, new, live(old), snapshot(sid=3, total=10), changelog=log,
             commit_user="ingest", properties={"k": "v"})
    assert p.delta == tuple(new) and p.changelog == tuple(log)
    assert (p.snapshot_id, p.kind, p.commit_user, p.commit_identifier) == (
        4, CommitKind.APPEND, "ingest", 7)
    assert (p.total_record_count, p.delta_record_count, p.changelog_record_count) == (15, 5, 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.snapshot_id = 5  # type: ignore[misc]
    snap = p.snapshot(("manifest-list-1", 10), ("manifest-list-2", 20),
                      ("manifest-list-3", 30), time_millis=1234)
    assert (snap.id, snap.base_manifest_list, snap.delta_manifest_list_size,
            snap.changelog_manifest_list, snap.time_millis, snap.properties) == (
        4, "manifest-list-1", 20, "manifest-list-3", 1234, {"k": "v"})
    assert (snap.commit_kind, snap.total_record_count, snap.delta_record_count) == (
        CommitKind.APPEND, 15, 5)


def test_first_commit_without_changelog():
    p = plan(CommitKind.APPEND, [add(file("data-1.parquet", rows=2))], {}, None)
    assert (p.snapshot_id, p.total_record_count, p.changelog_record_count) == (1, 2, None)
    snap = p.snapshot(("b", 1), ("d", 2), None, time_millis=0)
    assert snap.changelog_manifest_list is None and snap.properties is None


def test_overwrite_deletes_the_matching_partitions_live_files():
    a, b = add(file("data-a.parquet", rows=4)), add(file("data-b.parquet", rows=6), partition=B)
    new = [add(file("data-n.parquet", rows=1))]
    changes = overwrite_changes(live(a, b), new, lambda p: p == A)
    assert changes == [delete(a.file)] + new
    p = plan(CommitKind.OVERWRITE, changes, live(a, b), snapshot(total=10))
    assert (p.total_record_count, p.delta_record_count) == (7, -3)
    assert overwrite_changes(live(a, b), new, None) == [delete(a.file), delete(b.file,
                                                                              partition=B)] + new


def test_pure_append_reads_only_manifests_of_other_bucket_counts():
    def meta(name, buckets):
        return ManifestFileMeta(name, 1, 1, 0, EMPTY_STATS, 0, total_buckets=buckets)

    metas = [meta("m-same", 2), meta("m-other", 4), meta("m-mixed", None)]
    changes = [add(file("data-1.parquet"), buckets=2)]
    assert [m.file_name for m in bucket_count_suspects(metas, changes)] == ["m-other", "m-mixed"]
    assert not is_pure_append([delete(file("data-1.parquet"))])


def test_merged_base_keeps_live_files_sorted():
    x, y = file("data-x.parquet", level=2), file("data-y.parquet")
    entries = [add(x), add(y, partition=B), add(file("data-z.parquet")),
               delete(file("data-z.parquet"))]
    assert merged_base(entries) == [add(x), add(y, partition=B)]
