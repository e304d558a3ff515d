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
    IndexConflictError,
    LevelOverlapConflict,
)
from lakecore.format.binary_row import encode_row
from lakecore.format.index_manifest import (
    DELETION_VECTORS_INDEX,
    HASH_INDEX,
    DeletionVectorRange,
    IndexFileMeta,
    IndexManifestEntry,
)
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
    # Paimon's ConflictDetection: "Total buckets of partition ... changed from 2 to 4 without
    # overwrite. Give up committing."
    with pytest.raises(BucketCountConflict, match=r"^bucket count conflict: Total buckets of "
                                                  r"partition .* changed from 2 to 4 without "
                                                  r"overwrite.*'ingest-2'"):
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


# -- the index layer: carry, apply, overwrite, conflicts -------------------------------------


def index(name: str, kind: str = HASH_INDEX, partition: bytes = A, bucket: int = 0,
          rows: int = 4, file_kind: FileKind = FileKind.ADD) -> IndexManifestEntry:
    dv = ({"data-1.parquet": DeletionVectorRange("data-1.parquet", 1, 20, 3)}
          if kind == DELETION_VECTORS_INDEX else None)
    return IndexManifestEntry(file_kind, partition, bucket,
                              IndexFileMeta(kind, name, 16, rows, dv_ranges=dv))


def gone(e: IndexManifestEntry) -> IndexManifestEntry:
    return e.as_delete()


def indexed(sid: int = 3, manifest: str | None = "index-manifest-u-0", **kw) -> Snapshot:
    return dataclasses.replace(snapshot(sid), index_manifest=manifest, **kw)


def names(entries) -> list[tuple[bytes, int, str, str]]:
    return [(e.partition, e.bucket, e.index_file.index_type, e.index_file.file_name)
            for e in entries]


@pytest.mark.parametrize("kind", [CommitKind.APPEND, CommitKind.COMPACT])
def test_a_commit_without_index_changes_carries_the_index_manifest_by_name(kind):
    p = plan(kind, [add(file("data-9.parquet"))], {}, indexed(), previous_index=None)
    assert p.index_manifest == "index-manifest-u-0" and not p.writes_index_manifest
    s = p.snapshot(("l-b", 1), ("l-d", 1), None, time_millis=5)
    assert s.index_manifest == "index-manifest-u-0"
    # a table without an index manifest gets none
    assert plan(kind, [add(file("data-9.parquet"))], {}, snapshot()).snapshot(
        ("l-b", 1), ("l-d", 1), None, time_millis=5).index_manifest is None


def test_an_index_increment_replaces_the_buckets_file_and_keeps_the_others():
    old_a0, b1 = index("index-a0"), index("index-b1", partition=B, bucket=1)
    dv = index("index-dv-a0", DELETION_VECTORS_INDEX)
    new_a0 = index("index-a0-v2", rows=6)
    p = plan(CommitKind.APPEND, [add(file("data-9.parquet"))], {}, indexed(),
             index_changes=[gone(old_a0), new_a0], previous_index=[old_a0, b1, dv])
    assert p.writes_index_manifest and p.index_manifest is None
    assert names(p.index_entries) == [(B, 1, HASH_INDEX, "index-b1"),
                                      (A, 0, DELETION_VECTORS_INDEX, "index-dv-a0"),
                                      (A, 0, HASH_INDEX, "index-a0-v2")]
    assert all(e.kind is FileKind.ADD for e in p.index_entries)
    snap = p.snapshot(("l-b", 1), ("l-d", 1), None, time_millis=5,
                      written_index_manifest="index-manifest-new")
    assert snap.index_manifest == "index-manifest-new"


def test_an_increment_that_removes_the_last_index_file_leaves_no_index_manifest():
    dv = index("index-dv-a0", DELETION_VECTORS_INDEX)
    p = plan(CommitKind.COMPACT, [add(file("data-9.parquet", level=1))], {}, indexed(),
             index_changes=[gone(dv)], previous_index=[dv])
    assert p.index_entries == ()
    assert p.snapshot(("l-b", 1), ("l-d", 1), None, time_millis=5,
                      written_index_manifest=None).index_manifest is None


def test_the_first_index_of_a_new_table_needs_no_previous_manifest():
    p = plan(CommitKind.APPEND, [add(file("data-1.parquet"))], {}, None,
             index_changes=[index("index-a0")])
    assert names(p.index_entries) == [(A, 0, HASH_INDEX, "index-a0")]


def test_overwrite_drops_the_index_entries_of_the_replaced_partitions_only():
    a0, a1 = index("index-a0"), index("index-a1", bucket=1)
    a_dv = index("index-dv-a0", DELETION_VECTORS_INDEX)
    b0 = index("index-b0", partition=B)
    new_a0 = index("index-a0-new", rows=2)  # the overwriting writer's index, built from nothing
    p = plan(CommitKind.OVERWRITE, [add(file("data-9.parquet"))], {}, indexed(),
             index_changes=[new_a0], previous_index=[a0, a1, a_dv, b0],
             overwrite_matches=lambda part: part == A)
    assert names(p.index_entries) == [(B, 0, HASH_INDEX, "index-b0"),
                                      (A, 0, HASH_INDEX, "index-a0-new")]
    # overwriting everything (no filter) with no new index leaves none
    p = plan(CommitKind.OVERWRITE, [], {}, indexed(), previous_index=[a0, b0])
    assert p.index_entries == ()
    # an overwrite of a partition without index files keeps the manifest by name
    p = plan(CommitKind.OVERWRITE, [], {}, indexed(), previous_index=[b0],
             overwrite_matches=lambda part: part == A)
    assert p.index_manifest == "index-manifest-u-0" and not p.writes_index_manifest


@pytest.mark.parametrize("kind", [HASH_INDEX, DELETION_VECTORS_INDEX])
def test_replacing_an_index_file_that_is_no_longer_live_is_an_index_conflict(kind):
    read = index("index-read", kind)  # what the writer read and replaces
    now = index("index-other-writer", kind)  # what another writer committed since
    with pytest.raises(IndexConflictError) as info:
        plan(CommitKind.APPEND, [], {}, indexed(), index_changes=[gone(read), index("mine", kind)],
             previous_index=[now], table_name="db.t", partition_label=lambda p: "dt=a")
    err = info.value
    assert isinstance(err, CommitConflictError)
    assert (err.table, err.partition, err.bucket, err.index_type) == ("db.t", "dt=a", 0, kind)
    assert str(err).startswith("index conflict: table db.t partition dt=a bucket 0")
    assert "index-read" in str(err) and "index-other-writer" in str(err)
    assert "compactor-2" in str(err)


def test_adding_an_index_while_one_is_live_without_replacing_it_is_an_index_conflict():
    with pytest.raises(IndexConflictError, match="index-live"):
        plan(CommitKind.APPEND, [], {}, indexed(), index_changes=[index("index-mine")],
             previous_index=[index("index-live")])
    # a DELETE alone of a file someone else already replaced conflicts too
    with pytest.raises(IndexConflictError, match="index-old"):
        plan(CommitKind.COMPACT, [], {}, indexed(),
             index_changes=[gone(index("index-old", DELETION_VECTORS_INDEX))],
             previous_index=[index("index-new", DELETION_VECTORS_INDEX)])


def test_index_changes_of_other_buckets_types_and_partitions_do_not_conflict():
    live_index = [index("index-a0"), index("index-b0", partition=B),
                  index("index-dv-a0", DELETION_VECTORS_INDEX)]
    p = plan(CommitKind.APPEND, [], {}, indexed(),
             index_changes=[index("index-a1", bucket=1),
                            gone(live_index[1]), index("index-b0-v2", partition=B)],
             previous_index=live_index)
    assert sorted(n for *_, n in names(p.index_entries)) == [
        "index-a0", "index-a1", "index-b0-v2", "index-dv-a0"]
    # global indexes (other types) accumulate unchecked
    g = IndexManifestEntry(FileKind.ADD, A, 0, IndexFileMeta("BTREE", "global-1", 1, 1))
    p = plan(CommitKind.APPEND, [], {}, indexed(), index_changes=[g],
             previous_index=[IndexManifestEntry(FileKind.ADD, A, 0,
                                                IndexFileMeta("BTREE", "global-0", 1, 1))])
    assert [n for *_, n in names(p.index_entries)] == ["global-0", "global-1"]


def test_watermark_next_row_id_and_statistics_are_carried_as_paimon_does():
    latest = indexed(watermark=1_700, next_row_id=42, statistics="stat-u-0")
    p = plan(CommitKind.APPEND, [add(file("data-9.parquet"))], {}, latest, schema_id=0,
             statistics_schema_id=0)
    s = p.snapshot(("l-b", 1), ("l-d", 1), None, time_millis=5)
    assert (s.watermark, s.next_row_id, s.statistics) == (1_700, 42, "stat-u-0")
    # statistics computed for another schema (an ALTER since) or unreadable are not inherited
    for stats_schema in (0, None):
        p = plan(CommitKind.COMPACT, [], {}, latest, schema_id=1,
                 statistics_schema_id=stats_schema)
        s = p.snapshot(("l-b", 1), ("l-d", 1), None, time_millis=5)
        assert s.statistics is None and s.watermark == 1_700 and s.next_row_id == 42
    # unknown keys of the previous snapshot describe it alone: never inherited
    foreign = dataclasses.replace(latest, extra={"operation": "TRUNCATE"})
    s = plan(CommitKind.APPEND, [], {}, foreign).snapshot(("l-b", 1), ("l-d", 1), None, 5)
    assert s.extra is None
