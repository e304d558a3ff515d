"""Dynamic bucket mode (``bucket = -1``, Paimon's default for a primary-key table): the
assigner's rules, the HASH index lakecore maintains, and the commit protocol around it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakecore import CatalogFactory, Schema
from lakecore.errors import CommitConflictError, OptionError, UnsupportedFeatureError
from lakecore.format.hash_index import decode_hash_index
from lakecore.format.index_manifest import HASH_INDEX
from lakecore.table import FileStoreTable
from lakecore.write.bucket_assigner import PartitionIndex, assign, compute_assigner
from lakecore.write.routing import Slice
from tests.core.helpers import make_table, read, write

SCHEMA = pa.schema([pa.field("dt", pa.string(), nullable=False),
                    pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def rows(dt: str, ids: range | list[int], v: str) -> pa.Table:
    ids = list(ids)
    return pa.table({"dt": [dt] * len(ids), "id": ids, "v": [v] * len(ids)}, schema=SCHEMA)


def dyn_table(wh: Path, **options: str) -> FileStoreTable:
    return make_table(str(wh), SCHEMA, primary_keys=["dt", "id"], partition_keys=["dt"],
                      options=options)


def keys_by_bucket(table: FileStoreTable) -> dict[tuple[str, int], set[int]]:
    """The ids in the live data files of every (dt, bucket), read from the Parquet files."""
    out: dict[tuple[str, int], set[int]] = {}
    for s in table.new_read_builder().new_scan().plan().splits():
        ids = out.setdefault((s.partition[0], s.bucket), set())
        for f in s.files:
            path = table.paths.data_file_path(s.partition, s.bucket, f.file_name)
            ids.update(pq.read_table(path, columns=["id"]).column("id").to_pylist())
    return out


def index_files(table: FileStoreTable) -> dict[tuple[str, int], Any]:
    snap = table.snapshot_manager.latest()
    out = {}
    for e in table.index_entries(snap, HASH_INDEX):
        (dt,) = table.partition_codec.decode(e.partition)
        out[(dt, e.bucket)] = e.index_file
    return out


def index_hashes(table: FileStoreTable, dt: str, bucket: int) -> list[int]:
    meta = index_files(table)[(dt, bucket)]
    path = f"{table.table_path}/index/{meta.file_name}"
    return sorted(decode_hash_index(Path(path).read_bytes(), path).tolist())


def java_key_hash(ids: list[int]) -> list[int]:
    """BinaryRow(BIGINT id).hashCode() written out: MurmurHash3-32, seed 42, over the 16-byte
    row (8-byte null-bit header of zeros, then the long), little-endian words, length 16."""
    def mix(h: int, k: int) -> int:
        k = (k * 0xCC9E2D51) & 0xFFFFFFFF
        k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
        k = (k * 0x1B873593) & 0xFFFFFFFF
        h ^= k
        h = ((h << 13) | (h >> 19)) & 0xFFFFFFFF
        return (h * 5 + 0xE6546B64) & 0xFFFFFFFF

    out = []
    for i in ids:
        h = 42
        raw = (0).to_bytes(8, "little") + (i & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little")
        for j in range(0, 16, 4):
            h = mix(h, int.from_bytes(raw[j:j + 4], "little"))
        h ^= 16
        h ^= h >> 16
        h = (h * 0x85EBCA6B) & 0xFFFFFFFF
        h ^= h >> 13
        h = (h * 0xC2B2AE35) & 0xFFFFFFFF
        h ^= h >> 16
        out.append(h - (1 << 32) if h >= 1 << 31 else h)
    return out


# -- the pure assigner ----------------------------------------------------------------------
def test_existing_keys_keep_their_bucket_new_keys_fill_then_open_buckets() -> None:
    index = PartitionIndex.of({0: np.array([10, 20], np.int32), 1: np.array([30], np.int32)})
    got = assign(index, np.array([30, 10, 1, 2, 3, 4, 1], np.int32), target_row_num=3)
    # 30 and 10 stay; 1 fills bucket 0 (2 -> 3 rows), 2 and 3 fill bucket 1, 4 opens bucket 2,
    # the repeated 1 keeps its fresh bucket
    assert got.buckets.tolist() == [1, 0, 0, 1, 1, 2, 0]
    assert dict(got.index.row_counts) == {0: 3, 1: 3, 2: 1}
    assert got.touched == {0, 1, 2}
    assert got.index.bucket_hashes(1).tolist() == [2, 3, 30]


def test_assigners_create_only_their_own_bucket_ids() -> None:
    index = PartitionIndex.of({0: np.array([5], np.int32)})  # assigner 0's full bucket
    got = assign(index, np.arange(100, 107, dtype=np.int32), target_row_num=2,
                 num_assigners=3, assign_id=1)
    assert sorted(set(got.buckets.tolist())) == [1, 4, 7, 10]  # b % 3 == 1, 2 keys each
    assert got.buckets.tolist() == [1, 1, 4, 4, 7, 7, 10]


def test_max_buckets_is_respected_and_overflow_is_deterministic() -> None:
    keys = np.arange(-20, 20, dtype=np.int32)
    first = assign(PartitionIndex.empty(), keys, target_row_num=5, max_buckets=3)
    again = assign(PartitionIndex.empty(), keys, target_row_num=5, max_buckets=3)
    assert set(first.buckets.tolist()) == {0, 1, 2}
    assert first.buckets.tolist() == again.buckets.tolist()
    assert sum(first.index.row_counts.values()) == 40
    with pytest.raises(OptionError, match="dynamic-bucket.max-buckets"):
        assign(PartitionIndex.empty(), keys, target_row_num=5, max_buckets=1,
               num_assigners=2, assign_id=1)


def test_compute_assigner_is_javas_formula() -> None:
    def java(p: int, k: int, channels: int, assigners: int) -> int:
        rem = lambda a, b: int(np.fmod(a, b))  # noqa: E731 - Java's truncating %
        return (abs(rem(p, channels)) + abs(rem(k, assigners))) % channels

    keys = np.array([-7, -1, 0, 3, 2**31 - 1, -(2**31)], np.int32)
    for p in (-(2**31), -5, 0, 17):
        got = compute_assigner(p, keys, 4, 3).tolist()
        assert got == [java(p, int(k), 4, 3) for k in keys]


# -- tables ---------------------------------------------------------------------------------
def test_primary_key_table_defaults_to_dynamic_buckets(tmp_path: Path) -> None:
    t = dyn_table(tmp_path)
    assert t.options.bucket == -1
    write(t, rows("a", range(5), "x"))
    assert read(t, "id") == rows("a", range(5), "x").to_pylist()
    files = index_files(t)
    assert set(files) == {("a", 0)}
    assert index_hashes(t, "a", 0) == sorted(java_key_hash(list(range(5))))
    assert files[("a", 0)].row_count == 5
    # manifest entries record total_buckets -1, as pypaimon 2.1 writes them
    snap = t.snapshot_manager.latest()
    mio = t.manifest_io()
    entries = mio.read_entries(mio.read_manifest_list(snap.delta_manifest_list))
    assert entries and {e.total_buckets for e in entries} == {-1}


def test_cross_partition_upsert_is_refused_at_create(tmp_path: Path) -> None:
    catalog = CatalogFactory.create({"warehouse": str(tmp_path)})
    catalog.create_database("db")
    with pytest.raises(OptionError) as info:
        catalog.create_table("db.t", Schema.from_pyarrow_schema(
            SCHEMA, partition_keys=["dt"], primary_keys=["id"]))
    text = str(info.value)
    assert "cross-partition" in text and "include the partition keys" in text
    assert "fixed number of buckets" in text
    assert not (tmp_path / "db.db" / "t").exists()


def test_target_row_num_spreads_keys_and_updates_keep_their_bucket(tmp_path: Path) -> None:
    t = dyn_table(tmp_path, **{"dynamic-bucket.target-row-num": "10"})
    write(t, rows("a", range(35), "v1"), rows("b", range(4), "v1"))
    first = keys_by_bucket(t)
    assert sorted(len(first[("a", b)]) for b in range(4)) == [5, 10, 10, 10]
    # updates of every other key plus new keys, in one commit
    write(t, rows("a", range(0, 35, 2), "v2"), rows("a", range(35, 41), "v2"))
    after = keys_by_bucket(t)
    owner = {i: b for (dt, b), ids in after.items() if dt == "a" for i in ids}
    for (dt, b), ids in first.items():
        if dt == "a":
            assert all(owner[i] == b for i in ids)  # no key moved
    a_buckets = [ids for (dt, _), ids in after.items() if dt == "a"]
    assert sum(len(ids) for ids in a_buckets) == 41  # every key in exactly one bucket
    assert len(set().union(*a_buckets)) == 41
    counts = {b: m.row_count for (dt, b), m in index_files(t).items() if dt == "a"}
    assert sum(counts.values()) == 41 and max(counts.values()) == 10
    expected = {**{(r["dt"], r["id"]): r for r in rows("a", range(35), "v1").to_pylist()},
                **{(r["dt"], r["id"]): r for r in rows("a", range(0, 35, 2), "v2").to_pylist()},
                **{(r["dt"], r["id"]): r for r in rows("a", range(35, 41), "v2").to_pylist()},
                **{(r["dt"], r["id"]): r for r in rows("b", range(4), "v1").to_pylist()}}
    assert read(t, ["dt", "id"]) == [expected[k] for k in sorted(expected)]


def test_max_buckets_caps_the_buckets_per_partition(tmp_path: Path) -> None:
    t = dyn_table(tmp_path, **{"dynamic-bucket.target-row-num": "5",
                               "dynamic-bucket.max-buckets": "2"})
    write(t, rows("a", range(30), "x"))
    write(t, rows("a", range(30, 40), "x"))
    assert {b for (_, b) in keys_by_bucket(t)} == {0, 1}
    assert sum(m.row_count for m in index_files(t).values()) == 40
    assert len(read(t)) == 40


def test_bad_max_buckets_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match="dynamic-bucket.max-buckets"):
        dyn_table(tmp_path, **{"dynamic-bucket.max-buckets": "0"})


def test_deleted_key_keeps_its_hash_and_comes_back_to_its_bucket(tmp_path: Path) -> None:
    # delete through the row kind column of a table that has one
    t = make_table(str(tmp_path), SCHEMA.append(pa.field("rk", pa.string())),
                   primary_keys=["dt", "id"], partition_keys=["dt"], name="db.k",
                   options={"dynamic-bucket.target-row-num": "3", "rowkind.field": "rk"})
    data = rows("a", range(9), "x").append_column("rk", pa.array(["+I"] * 9))
    write(t, data)
    owner = {i: b for (_, b), ids in keys_by_bucket(t).items() for i in ids}
    counts = {k: m.row_count for k, m in index_files(t).items()}
    write(t, pa.table({"dt": ["a"], "id": [4], "v": ["x"], "rk": ["-D"]}))
    assert 4 not in [r["id"] for r in read(t)]
    assert {k: m.row_count for k, m in index_files(t).items()} == counts
    write(t, pa.table({"dt": ["a"], "id": [4], "v": ["back"], "rk": ["+I"]}))
    assert any(r["id"] == 4 and r["v"] == "back" for r in read(t))
    assert 4 in keys_by_bucket(t)[("a", owner[4])]


def test_concurrent_assignment_into_one_partition_is_refused(tmp_path: Path) -> None:
    t = dyn_table(tmp_path, **{"dynamic-bucket.target-row-num": "100"})
    write(t, rows("a", range(10), "base"))
    w1, w2, w3 = (t.new_batch_write_builder() for _ in range(3))
    a, b, c = w1.new_write(), w2.new_write(), w3.new_write()
    a.write_arrow(rows("a", range(10, 20), "one"))
    b.write_arrow(rows("a", range(20, 30), "two"))
    c.write_arrow(rows("b", range(5), "other"))  # another partition: no conflict
    m1, m2, m3 = a.prepare_commit(), b.prepare_commit(), c.prepare_commit()  # same base
    w1.new_commit().commit(m1)
    with pytest.raises(CommitConflictError) as info:
        w2.new_commit().commit(m2)
    assert type(info.value) is not CommitConflictError  # a named kind of conflict
    w3.new_commit().commit(m3)
    assert sorted(r["id"] for r in read(t) if r["dt"] == "a") == list(range(20))
    assert sorted(r["id"] for r in read(t) if r["dt"] == "b") == list(range(5))
    # the retry: a fresh writer starts from the latest index
    write(t, rows("a", range(20, 30), "two"))
    got = [r for r in read(t, "id") if r["dt"] == "a"]
    assert [r["id"] for r in got] == list(range(30))
    assert index_hashes(t, "a", 0) == sorted(java_key_hash(list(range(30))))


def test_stream_commits_replace_their_own_index_file(tmp_path: Path) -> None:
    t = dyn_table(tmp_path)
    sb = t.new_stream_write_builder()
    w, c = sb.new_write(), sb.new_commit()
    w.write_arrow(rows("a", range(3), "x"))
    m1 = w.prepare_commit(1)
    c.commit(m1, 1)
    w.write_arrow(rows("a", range(3, 6), "x"))
    m2 = w.prepare_commit(2)
    assert [f.file_name for f in m2[0].deleted_index_files] == \
        [f.file_name for f in m1[0].new_index_files]
    c.commit(m2, 2)
    assert index_hashes(t, "a", 0) == sorted(java_key_hash(list(range(6))))
    assert [r["id"] for r in read(t, "id")] == list(range(6))


def test_overwrite_rebuilds_the_partitions_index(tmp_path: Path) -> None:
    t = dyn_table(tmp_path, **{"dynamic-bucket.target-row-num": "4"})
    write(t, rows("a", range(12), "x"), rows("b", range(3), "x"))
    assert {k for k in index_files(t) if k[0] == "a"} == {("a", 0), ("a", 1), ("a", 2)}
    write(t, rows("a", [100, 101], "y"), overwrite={"dt": "a"})
    files = index_files(t)
    assert {k for k in files if k[0] == "a"} == {("a", 0)}
    assert index_hashes(t, "a", 0) == sorted(java_key_hash([100, 101]))
    assert ("b", 0) in files
    write(t, rows("a", range(3), "z"))  # new keys again, no stale hash in the way
    assert sorted(r["id"] for r in read(t) if r["dt"] == "a") == [0, 1, 2, 100, 101]


def test_compaction_keeps_the_index_and_keys_stay_put(tmp_path: Path) -> None:
    t = dyn_table(tmp_path, **{"dynamic-bucket.target-row-num": "5", "write-only": "true"})
    for v in ("a", "b", "c"):
        write(t, rows("x", range(12), v))
    before = keys_by_bucket(t)
    hashes = {k: index_hashes(t, *k) for k in index_files(t)}
    t.compact(full=True)
    assert {k: index_hashes(t, *k) for k in index_files(t)} == hashes
    assert keys_by_bucket(t) == before
    write(t, rows("x", range(10, 14), "d"))
    owner = {i: b for (_, b), ids in keys_by_bucket(t).items() for i in ids}
    assert all(owner[i] == b for (_, b), ids in before.items() for i in ids)
    assert [r["v"] for r in read(t, "id")] == ["c"] * 10 + ["d"] * 4


def test_partition_with_data_but_no_hash_index_is_refused(tmp_path: Path) -> None:
    """Data in a bucket the HASH index does not cover (a writer that kept no index) would
    let new keys duplicate existing ones: the write is refused and the table left as it is."""
    t = dyn_table(tmp_path)
    wb = t.new_batch_write_builder()
    w = wb.new_write()  # rows routed elsewhere and handed over as they are: no index kept
    w.write_slices([Slice(("a",), 0, rows("a", range(3), "x"),
                          pa.array([0, 0, 0], pa.int8()))])
    wb.new_commit().commit(w.prepare_commit())
    assert index_files(t) == {}
    snapshot = t.snapshot_manager.latest_id()
    with pytest.raises(UnsupportedFeatureError) as info:
        write(t, rows("a", [1, 7], "y"))
    assert "no HASH index in bucket(s) [0]" in str(info.value) and "overwrite" in str(info.value)
    assert t.snapshot_manager.latest_id() == snapshot
    write(t, rows("b", [1], "y"))  # other partitions are fine
    write(t, rows("a", range(3), "z"), overwrite={"dt": "a"})  # an overwrite rebuilds it
    write(t, rows("a", [7], "w"))
    assert sorted(r["id"] for r in read(t) if r["dt"] == "a") == [0, 1, 2, 7]


def test_channels_use_paimons_partition_hash() -> None:
    """The assigner channel of a row starts from the partition's BinaryRow hash; the expected
    hashes are pypaimon 2.1's (``DynamicBucketRowKeyExtractor._binary_row_hash_code``)."""
    from lakecore.format.bucket import hash_row
    from lakecore.schema.types import parse_type

    string = [parse_type("STRING NOT NULL")]
    assert [hash_row((p,), string) for p in ("a", "2026-11-01", "")] == \
        [943281246, 1662768283, 302122119]
    keys = np.array(java_key_hash([1, 2, 3]), np.int32)
    got = compute_assigner(1662768283, keys, 5, 3).tolist()
    assert got == [(1662768283 % 5 + abs(int(k)) % 3) % 5 for k in keys]


def test_a_hash_in_two_buckets_keeps_the_lower_one() -> None:
    index = PartitionIndex.of({3: np.array([7, 9], np.int32), 1: np.array([9], np.int32)})
    assert index.lookup(np.array([9, 7, 8], np.int32)).tolist() == [1, 3, -1]


def _model_assign(index: dict[int, int], counts: dict[int, int], keys: list[int], target: int,
                  limit: int, num_assigners: int, assign_id: int) -> list[int]:
    """Paimon's assigner rules key by key (the reference the columnar assign must equal)."""
    out = []
    for k in keys:
        if k not in index:
            mine = sorted(b for b in counts if b % num_assigners == assign_id % num_assigners)
            room = [b for b in mine if counts[b] < target]
            if room:
                b = room[0]
            else:
                fresh = [b for b in range(assign_id % num_assigners, limit, num_assigners)
                         if b not in counts]
                b = fresh[0] if fresh else mine[abs(k) % len(mine)]
            index[k] = b
            counts[b] = counts.get(b, 0) + 1
        out.append(index[k])
    return out


@pytest.mark.parametrize("seed", range(12))
def test_batches_assigned_one_after_another_match_the_key_by_key_rules(seed: int) -> None:
    """Several batches into the index each assign returns (its new hashes merged in only
    when it is next read), with repeats, known keys, full buckets and several assigners."""
    rng = np.random.default_rng(seed)
    target = int(rng.integers(1, 40))
    num_assigners = int(rng.integers(1, 4))
    assign_id = int(rng.integers(0, num_assigners))
    max_buckets = int(rng.choice([-1, 6]))
    limit = 32768 if max_buckets == -1 else max_buckets
    if assign_id % num_assigners >= limit:
        return
    other = [b for b in range(limit) if b % num_assigners != assign_id % num_assigners][:1]
    start = {b: rng.choice(1000, size=int(rng.integers(1, 30)), replace=False).astype(np.int32)
             for b in other}  # another assigner's bucket: its keys stay there
    index = PartitionIndex.of(start)
    model = {int(h): b for b, hs in start.items() for h in hs}
    counts = {b: len(hs) for b, hs in start.items()}
    for _ in range(4):
        keys = rng.integers(-1500, 1500, size=int(rng.integers(1, 200))).astype(np.int32)
        got = assign(index, keys, target_row_num=target, max_buckets=max_buckets,
                     num_assigners=num_assigners, assign_id=assign_id)
        want = _model_assign(model, counts, keys.tolist(), target, limit, num_assigners,
                             assign_id)
        assert got.buckets.tolist() == want
        index = got.index
        assert dict(index.row_counts) == counts
    assert index.hashes.tolist() == sorted(model)
    assert index.hash_buckets.tolist() == [model[h] for h in sorted(model)]
    for b in counts:
        assert index.bucket_hashes(b).tolist() == sorted(h for h, x in model.items() if x == b)


def test_a_single_unsorted_index_file_is_read_like_a_sorted_one() -> None:
    """Java Paimon writes a bucket's hashes in hash-set order, not sorted."""
    hashes = np.array([40, -3, 17, 5], np.int32)
    index = PartitionIndex.of({2: hashes})
    assert index.hashes.tolist() == [-3, 5, 17, 40]
    assert index.lookup(np.array([17, 6, -3], np.int32)).tolist() == [2, -1, 2]
    assert index.bucket_hashes(2).tolist() == [-3, 5, 17, 40]
