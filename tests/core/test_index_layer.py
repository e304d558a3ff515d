"""The index layer through lakecore's own commits: index increments land in the right snapshot,
every commit carries the index manifest forward, a concurrent index writer fails cleanly with
nothing lost, a retry after a lost race recomputes, abort deletes index files, and ``inspect``
shows HASH buckets and deleted-row ratios.

Index files here are real files in Paimon's HASH layout (big-endian int32 key hashes) written
where Paimon puts them; the commit messages name them as a dynamic-bucket writer or a
deletion-vector compaction would.
"""

from __future__ import annotations

import json
import struct
from datetime import datetime, timedelta
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest

from lakecore import CatalogFactory
from lakecore.cli.main import main
from lakecore.commit.file_store_commit import FileStoreCommit
from lakecore.commit.message import CommitMessage
from lakecore.errors import CommitConflictError, IndexConflictError
from lakecore.format.index_manifest import (
    DELETION_VECTORS_INDEX,
    HASH_INDEX,
    DeletionVectorRange,
    IndexFileMeta,
)
from lakecore.maintenance import ExpireConfig
from lakecore.schema.schema_change import SchemaChange
from lakecore.table import FileStoreTable
from tests.core.helpers import make_table, read, table_files, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("dt", pa.string(), False),
                    ("v", pa.int64())])


def table(tmp_path: Path, **options: str) -> FileStoreTable:
    return make_table(str(tmp_path), SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                      options={"bucket": "2", "write-only": "true", **options})


def hash_file(t: FileStoreTable, hashes: list[int], directory: str | None = None
              ) -> IndexFileMeta:
    """Write a HASH index file (sorted big-endian int32 hashes) and describe it."""
    name = t.paths.new_index_file_name()
    path = f"{directory or t.paths.index_dir}/{name}"
    t.file_io.write_bytes(path, b"".join(struct.pack(">i", h) for h in sorted(hashes)))
    return IndexFileMeta(HASH_INDEX, name, 4 * len(hashes), len(hashes))


def msg(dt: str, bucket: int = 0, **kw) -> CommitMessage:
    return CommitMessage((dt,), bucket, 2, **kw)


def snapshot_doc(t: FileStoreTable, sid: int | None = None) -> dict:
    sid = sid if sid is not None else t.snapshot_manager.latest_id()
    return json.loads(Path(t.paths.snapshot_path(sid)).read_text())


def listed(t: FileStoreTable, sid: int | None = None) -> list[tuple[int, str, str]]:
    """(bucket, type, file) of a snapshot's index manifest, read with fastavro."""
    name = snapshot_doc(t, sid).get("indexManifest")
    if not name:
        return []
    with open(t.paths.manifest_path(name), "rb") as f:
        return sorted((r["_BUCKET"], r["_INDEX_TYPE"], r["_FILE_NAME"])
                      for r in fastavro.reader(f))


def test_index_increments_land_in_their_snapshot_and_every_commit_carries_them(tmp_path):
    t = table(tmp_path)
    h0 = hash_file(t, [11, 12])
    commit = FileStoreCommit(t, "assigner")
    assert commit.commit([msg("a", new_index_files=(h0,))], 1).snapshot_ids == (1,)
    assert snapshot_doc(t, 1)["commitKind"] == "APPEND"
    assert listed(t, 1) == [(0, HASH_INDEX, h0.file_name)]
    # plain data commits and a compaction change no index: the manifest name is carried
    write(t, {"id": [1, 2], "dt": ["a", "a"], "v": [1, 1]})
    t.compact(full=True)
    assert [snapshot_doc(t, i)["commitKind"] for i in (2, 3)] == ["APPEND", "COMPACT"]
    assert {snapshot_doc(t, i)["indexManifest"] for i in (1, 2, 3)} == {
        snapshot_doc(t, 1)["indexManifest"]}
    # the writer replaces the bucket's file: named in deleted_index_files
    h1 = hash_file(t, [11, 12, 13])
    commit.commit([msg("a", new_index_files=(h1,), deleted_index_files=(h0,))], 2)
    assert listed(t) == [(0, HASH_INDEX, h1.file_name)]
    # a compaction increment's deletion vectors go into the COMPACT snapshot, not the APPEND
    dv_name = t.paths.new_index_file_name()
    t.file_io.write_bytes(t.paths.index_file_path(dv_name), b"\x01" + b"\x00" * 20)
    dv = IndexFileMeta(DELETION_VECTORS_INDEX, dv_name, 21, 1)
    h2 = hash_file(t, [11, 12, 13, 14])
    result = commit.commit([msg("a", new_index_files=(h2,), deleted_index_files=(h1,),
                                compact_new_index_files=(dv,))], 3)
    append_id, compact_id = result.snapshot_ids
    assert listed(t, append_id) == [(0, HASH_INDEX, h2.file_name)]
    assert snapshot_doc(t, compact_id)["commitKind"] == "COMPACT"
    assert listed(t, compact_id) == [(0, DELETION_VECTORS_INDEX, dv_name),
                                     (0, HASH_INDEX, h2.file_name)]


def test_a_concurrent_index_writer_fails_cleanly_and_leaves_the_table_as_it_was(tmp_path):
    t = table(tmp_path)
    h0 = hash_file(t, [1])
    FileStoreCommit(t, "first").commit([msg("a", new_index_files=(h0,))])
    # two writers both read h0; the first to commit wins
    mine, theirs = hash_file(t, [1, 2]), hash_file(t, [1, 3])
    FileStoreCommit(t, "writer-1").commit(
        [msg("a", new_index_files=(mine,), deleted_index_files=(h0,))])
    before = table_files(t)
    wb = t.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(pa.table({"id": [3], "dt": ["a"], "v": [3]}, schema=SCHEMA))
    data = w.prepare_commit()
    w.close()
    late = [*data, msg("a", new_index_files=(theirs,), deleted_index_files=(h0,))]
    with pytest.raises(IndexConflictError) as info:
        FileStoreCommit(t, "writer-2").commit(late)
    err = info.value
    assert isinstance(err, CommitConflictError)
    assert (err.table, err.partition, err.bucket, err.index_type) == ("db.t", "dt=a", 0,
                                                                      HASH_INDEX)
    assert h0.file_name in str(err) and mine.file_name in str(err)
    # nothing of the late commit is kept: no snapshot, no data file, no index file
    assert t.snapshot_manager.latest_id() == 2
    assert table_files(t) == [f for f in before if theirs.file_name not in f]
    assert listed(t) == [(0, HASH_INDEX, mine.file_name)]


def test_a_retry_after_a_lost_race_recomputes_the_index_against_the_new_latest(tmp_path):
    t = table(tmp_path)
    a0, b1 = hash_file(t, [1]), hash_file(t, [2])
    racer = FileStoreCommit(t, "racer")
    raced = []
    calls = []

    def clock() -> float:
        # the committer's second clock reading is just before it publishes: the racer's
        # snapshot lands then, so the first attempt loses the race and is retried
        calls.append(1)
        if len(calls) == 2:
            raced.append(racer.commit([msg("a", new_index_files=(a0,))]))
        return 1_800_000_000.0

    slow = FileStoreCommit(t, "slow", clock=clock, sleep=lambda s: None)
    manifests_before = set(Path(t.paths.manifest_dir).glob("index-manifest-*"))
    result = slow.commit([msg("b", 1, new_index_files=(b1,))])
    assert raced and raced[0].snapshot_ids == (1,) and result.snapshot_ids == (2,)
    assert listed(t, 2) == [(0, HASH_INDEX, a0.file_name), (1, HASH_INDEX, b1.file_name)]
    # the lost attempt's index manifest was deleted with its other manifests
    left = set(Path(t.paths.manifest_dir).glob("index-manifest-*")) - manifests_before
    assert {p.name for p in left} == {snapshot_doc(t, i)["indexManifest"] for i in (1, 2)}


@pytest.mark.parametrize("in_data_dir", [False, True])
def test_abort_deletes_the_index_files_the_messages_wrote(tmp_path, in_data_dir):
    t = table(tmp_path, **({"index-file-in-data-file-dir": "true"} if in_data_dir else {}))
    write(t, {"id": [1], "dt": ["a"], "v": [1]})
    before = table_files(t)
    directory = t.paths.bucket_path(("a",), 0) if in_data_dir else None
    h, replaced = hash_file(t, [1], directory), hash_file(t, [9], directory)
    FileStoreCommit(t, "aborting").abort([msg("a", new_index_files=(h,),
                                              deleted_index_files=(replaced,))])
    after = table_files(t)
    assert not any(h.file_name in f for f in after)
    assert any(replaced.file_name in f for f in after)  # a replaced file is not the writer's
    assert set(after) - set(before) == {f for f in after if replaced.file_name in f}


def test_overwrite_drops_the_replaced_partitions_index_and_keeps_the_others(tmp_path):
    t = table(tmp_path)
    ha, hb = hash_file(t, [1]), hash_file(t, [2])
    FileStoreCommit(t, "assigner").commit([msg("a", new_index_files=(ha,)),
                                           msg("b", new_index_files=(hb,))])
    write(t, {"id": [5], "dt": ["a"], "v": [5]}, overwrite={"dt": "a"})
    assert snapshot_doc(t)["commitKind"] == "OVERWRITE"
    assert listed(t) == [(0, HASH_INDEX, hb.file_name)]
    assert read(t, "id") == [{"id": 5, "dt": "a", "v": 5}]


def test_inspect_shows_hash_buckets_and_deleted_row_ratios(tmp_path, capsys):
    t = table(tmp_path)
    write(t, {"id": [1, 2, 3, 4], "dt": ["a"] * 4, "v": [1] * 4})
    live = {}
    for split in t.new_read_builder().new_scan().plan().splits():
        for f in split.files:
            live[(split.bucket, f.file_name)] = f.row_count
    (bucket, data_file), rows = sorted(live.items())[0]
    name = t.paths.new_index_file_name()
    t.file_io.write_bytes(t.paths.index_file_path(name), b"\x00" * 30)
    dv = IndexFileMeta(DELETION_VECTORS_INDEX, name, 30, 1,
                       dv_ranges={data_file: DeletionVectorRange(data_file, 1, 20, 1)})
    FileStoreCommit(t, "idx").commit([
        msg("a", 0, new_index_files=(hash_file(t, [1, 2, 3]),)),
        msg("a", 1, new_index_files=(hash_file(t, [4]),)),
        msg("a", bucket, compact_new_index_files=(dv,))])
    assert main(["inspect", "--warehouse", str(tmp_path), "--table", "db.t", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["hash_index"] == [{"partition": "dt=a", "buckets": 2, "keys": 4,
                                "rows_per_bucket": {"0": 3, "1": 1}}]
    [d] = r["deletion_vectors"]
    assert (d["partition"], d["bucket"], d["deleted_rows"], d["rows"]) == ("dt=a", bucket, 1,
                                                                           rows)
    assert d["deleted_ratio"] == round(1 / rows, 4)
    assert r["compaction"]["snapshot_id"] == t.snapshot_manager.latest_id()
    assert main(["inspect", "--warehouse", str(tmp_path), "--table", "db.t"]) == 0
    text = capsys.readouterr().out
    assert "HASH index: 2 buckets, 4 keys (bucket: keys 0: 3, 1: 1)" in text
    assert f"deletion vectors on 1 files: 1 of {rows} rows deleted" in text


def test_watermark_next_row_id_and_statistics_of_a_foreign_snapshot_are_carried(tmp_path):
    """A snapshot another engine wrote (Java's ANALYZE: a statistics file; a watermark; a
    nextRowId; a key lakecore does not know) is followed by lakecore commits that keep the
    watermark and nextRowId, keep the statistics while the schema is the one they were
    computed for, and never copy the unknown key."""
    t = table(tmp_path)
    write(t, {"id": [1], "dt": ["a"], "v": [1]})
    doc = snapshot_doc(t, 1)
    stats_dir = Path(t.table_path) / "statistics"
    stats_dir.mkdir()
    (stats_dir / "stat-analyze-0").write_text(json.dumps(
        {"snapshotId": 1, "schemaId": 0, "mergedRecordCount": 1, "colStats": {}}))
    doc.update(id=2, commitKind="ANALYZE", deltaRecordCount=0, statistics="stat-analyze-0",
               watermark=1_700_000_000_000, nextRowId=77, operation="ANALYZE")
    Path(t.paths.snapshot_path(2)).write_text(json.dumps(doc))
    Path(t.paths.latest_hint).write_text("2")
    write(t, {"id": [2], "dt": ["a"], "v": [2]})  # snapshot 3
    s3 = snapshot_doc(t, 3)
    assert (s3["statistics"], s3["watermark"], s3["nextRowId"]) == (
        "stat-analyze-0", 1_700_000_000_000, 77)
    assert "operation" not in s3
    # after an ALTER the statistics describe an old schema: no longer inherited
    catalog = CatalogFactory.create({"warehouse": str(tmp_path)})
    catalog.alter_table("db.t", [SchemaChange.add_column("note", "STRING")])
    t = catalog.get_table("db.t")
    write(t, {"id": [3], "dt": ["a"], "v": [3], "note": ["x"]})  # snapshot 4
    s4 = snapshot_doc(t, 4)
    assert s4["schemaId"] == 1 and "statistics" not in s4
    assert (s4["watermark"], s4["nextRowId"]) == (1_700_000_000_000, 77)


def test_index_files_in_data_dirs_are_expired_and_kept_from_orphan_removal(tmp_path):
    """With index-file-in-data-file-dir the bucket directory holds the HASH files: expiry
    deletes the replaced one once no kept snapshot lists it, orphan removal keeps the live one
    and removes one no snapshot lists."""
    t = table(tmp_path, **{"index-file-in-data-file-dir": "true"})
    bucket_dir = t.paths.bucket_path(("a",), 0)
    h0 = hash_file(t, [1], bucket_dir)
    commit = FileStoreCommit(t, "assigner")
    commit.commit([msg("a", new_index_files=(h0,))], 1)
    h1 = hash_file(t, [1, 2], bucket_dir)
    commit.commit([msg("a", new_index_files=(h1,), deleted_index_files=(h0,))], 2)
    stray = hash_file(t, [7], bucket_dir)  # a writer that died before committing
    later = datetime.now() + timedelta(days=1)
    report = t.expire_snapshots(dry_run=False, now=later,
                                config=ExpireConfig(1, 1, timedelta(0), 10))
    assert report.details["index_files"] == 1 and report.details["index_manifests"] == 1
    on_disk = {p.name for p in Path(bucket_dir).iterdir()}
    assert h0.file_name not in on_disk and {h1.file_name, stray.file_name} <= on_disk
    removed = t.remove_orphan_files(older_than=timedelta(0), now=later, dry_run=False)
    assert {Path(f.path).name for f in removed.files} == {stray.file_name}
    assert {p.name for p in Path(bucket_dir).iterdir()} == {h1.file_name}
    assert listed(t) == [(0, HASH_INDEX, h1.file_name)]
