"""Deletion-vector tables in lakecore: invisible level 0, compaction marking superseded rows in
vectors instead of rewriting files, merges with partial-update / aggregation, deletes that stay
deleted, full compaction dropping vectors, and a table that turns vectors on later."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lakecore import CatalogFactory, SchemaChange
from lakecore.errors import OptionError
from lakecore.format.index_manifest import DELETION_VECTORS_INDEX
from lakecore.read.deletion_vectors import read_vectors
from lakecore.read.scan import TableScan
from tests.core.helpers import make_table, read, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string()),
                    ("op", pa.string())])
DV = {"bucket": "1", "deletion-vectors.enabled": "true", "write-only": "true",
      "rowkind.field": "op"}


def rows(ids, vs, op="+I"):
    return pa.table({"id": ids, "v": vs, "op": [op] * len(ids)}, schema=SCHEMA)


def values(t):
    return [(r["id"], r["v"]) for r in read(t, "id")]


def live_files(t):
    splits = TableScan(t).plan().splits()
    return {f.file_name: f for s in splits for f in s.files}


def dv_entries(t):
    return t.index_entries(t.snapshot_manager.latest(), DELETION_VECTORS_INDEX)


def vectors(t):
    """Data file name -> deleted positions, as the latest snapshot's index files say."""
    out = {}
    for s in TableScan(t).plan().splits():
        out.update({k: v.tolist() for k, v in read_vectors(t, dict(s.deletion_files)).items()})
    return out


def test_level0_invisible_until_compaction_then_vector_marks_old_row(tmp_path):
    t = make_table(str(tmp_path), SCHEMA, ["id"], options=DV)
    write(t, rows(list(range(10)), list("abcdefghij")))
    assert values(t) == []  # level 0 is not visible in a deletion-vector table
    t.compact()
    assert values(t) == list(zip(range(10), "abcdefghij", strict=True))
    base = set(live_files(t))
    write(t, rows([2, 15], ["B", "p"]))
    assert values(t) == list(zip(range(10), "abcdefghij", strict=True))  # not yet compacted
    t.compact()
    expected = [(i, v) for i, v in zip(range(10), "abcdefghij", strict=True) if i != 2]
    assert values(t) == sorted(expected + [(2, "B"), (15, "p")])
    # the old file was not rewritten: its row 2 (position 2) is marked in its vector
    files = live_files(t)
    assert base <= set(files)
    (old,) = base
    assert vectors(t) == {old: [2]}
    (entry,) = dv_entries(t)
    assert entry.index_file.dv_ranges[old].cardinality == 1


def test_merge_on_read_shows_level0(tmp_path):
    t = make_table(str(tmp_path), SCHEMA, ["id"],
                   options={**DV, "deletion-vectors.merge-on-read": "true"})
    write(t, rows([1, 2], ["a", "b"]))
    t.compact()
    write(t, rows([2, 3], ["B", "c"]))
    assert values(t) == [(1, "a"), (2, "B"), (3, "c")]


def test_delete_stays_deleted(tmp_path):
    t = make_table(str(tmp_path), SCHEMA, ["id"], options=DV)
    write(t, rows(list(range(20)), ["x"] * 20))
    t.compact()
    write(t, rows([5], [None], "-D"))
    t.compact()
    assert 5 not in [i for i, _ in values(t)]
    write(t, rows([100], ["y"]))
    assert 5 not in [i for i, _ in values(t)]
    t.compact()
    got = [i for i, _ in values(t)]
    assert 5 not in got and 100 in got and len(got) == 20
    t.compact(full=True)
    assert [i for i, _ in values(t)] == got


def test_full_compaction_leaves_no_vector_for_removed_files(tmp_path):
    t = make_table(str(tmp_path), SCHEMA, ["id"], options=DV)
    write(t, rows(list(range(20)), ["x"] * 20))
    t.compact()
    write(t, rows([1, 2], ["y", "y"]))
    t.compact()
    assert vectors(t)  # row 1 and 2 of the first file are marked
    expected = values(t)
    t.compact(full=True)
    assert values(t) == expected
    live = set(live_files(t))
    for e in dv_entries(t):
        assert set(e.index_file.dv_ranges or {}) <= live
    assert vectors(t) == {}


@pytest.mark.parametrize("engine,opts,first,second,third,expected", [
    ("partial-update", {}, (1, "a", None), (1, None, "b"), (1, "c", None), (1, "c", "b")),
    ("aggregation", {"fields.n.aggregate-function": "sum"}, (1, 5, None), (1, 3, None),
     (1, 1, None), (1, 9, None)),
])
def test_merging_engines_fold_the_old_row_in(tmp_path, engine, opts, first, second, third,
                                              expected):
    if engine == "partial-update":
        schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("a", pa.string()),
                            ("b", pa.string())])
        cols = ["id", "a", "b"]
    else:
        schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("n", pa.int64()),
                            ("b", pa.string())])
        cols = ["id", "n", "b"]
    t = make_table(str(tmp_path), schema, ["id"], options={
        "bucket": "1", "deletion-vectors.enabled": "true", "write-only": "true",
        "merge-engine": engine, **opts})
    others = {"id": list(range(2, 12)), cols[1]: [None] * 10, "b": [None] * 10}
    for row in (first, second, third):
        data = {c: [v] for c, v in zip(cols, row, strict=True)}
        write(t, pa.table({c: data[c] + others[c] for c in cols}, schema=schema))
        t.compact()
    got = [tuple(r[c] for c in cols) for r in read(t, "id") if r["id"] == 1]
    assert got == [expected]
    assert len(read(t, "id")) == 11


def test_inline_compaction_of_a_writer_marks_vectors(tmp_path):
    t = make_table(str(tmp_path), SCHEMA, ["id"],
                   options={**DV, "write-only": "false"})
    write(t, rows(list(range(10)), ["a"] * 10))
    assert values(t) == [(i, "a") for i in range(10)]  # the writer lifted level 0 itself
    write(t, rows([3], ["b"]))
    assert values(t) == [(i, "b" if i == 3 else "a") for i in range(10)]
    write(t, rows([3], [None], "-D"))
    write(t, rows([4], ["c"]))
    assert values(t) == [(i, "c" if i == 4 else "a") for i in range(10) if i != 3]


@pytest.mark.parametrize("with_delete", [True, False])
def test_turning_vectors_on_repairs_overlapping_levels(tmp_path, with_delete):
    # lookup compaction lifts level 0 just under the max level: runs overlap at levels >= 1
    opts = {"bucket": "1", "write-only": "true", "rowkind.field": "op",
            "changelog-producer": "lookup"}
    t = make_table(str(tmp_path), SCHEMA, ["id"], options=opts)
    write(t, rows(list(range(10)), ["a"] * 10))
    t.compact(full=True)
    write(t, rows([1, 2], ["b", "b"]))
    t.compact()
    if with_delete:
        write(t, rows([2], [None], "-D"))
        t.compact()  # leaves overlapping runs at levels >= 1 (merged on read)
    levels = {f.level for f in live_files(t).values()}
    assert len(levels - {0}) >= 2, levels
    expected = values(t)
    assert (1, "b") in expected and ((2 in [i for i, _ in expected]) is not with_delete)
    catalog = CatalogFactory.create({"warehouse": str(tmp_path)})
    catalog.alter_table("db.t", [SchemaChange.set_option("deletion-vectors.enabled", "true")])
    t = catalog.get_table("db.t")
    if not with_delete:  # read raw, as every engine reads a vector table: key 1 twice
        assert len(values(t)) == len(expected) + 2
    t.compact()  # the first compaction with vectors makes the levels consistent
    assert values(t) == expected
    # every live key once across the files as read raw with vectors (what other engines do)
    raw = [s for s in TableScan(t).plan().splits()]
    assert all(s.raw_with_vectors for s in raw)
    assert all(f.delete_row_count == 0 for s in raw for f in s.files)
    assert len(values(t)) == len({i for i, _ in values(t)})


def test_paimon_refuses_first_row_and_full_compaction_changelog_with_vectors(tmp_path):
    with pytest.raises(OptionError, match="first-row"):
        make_table(str(tmp_path), SCHEMA, ["id"], options={
            **DV, "merge-engine": "first-row"})
    with pytest.raises(OptionError, match="changelog-producer"):
        make_table(str(tmp_path), SCHEMA, ["id"], options={
            **DV, "changelog-producer": "full-compaction"}, name="db.u")


def _append_table_with_vector(tmp_path, small_files: int):
    """An append table whose first file lost rows 1 and 3 (ids 2 and 4) through a vector, as
    another engine's DELETE leaves it."""
    from lakecore.commit.message import CommitMessage
    from lakecore.compact.deletion_vectors import BucketVectors
    from lakecore.compact.job import commit_compaction

    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    t = make_table(str(tmp_path), schema, options={"deletion-vectors.enabled": "true"})
    write(t, {"id": [1, 2, 3, 4], "v": list("abcd")})
    for i in range(5, 5 + small_files):
        write(t, {"id": [i], "v": ["x"]})
    (split,) = TableScan(t).plan().splits()
    first = min(split.files, key=lambda f: f.min_sequence_number)
    dv = BucketVectors()
    dv.mark({first.file_name: np.array([1, 3], dtype=np.uint64)})
    new, _ = dv.write(t, split.partition, split.bucket)
    commit_compaction(t, [CommitMessage(split.partition, split.bucket, -1,
                                        compact_new_index_files=new)])
    return t, first.file_name


def test_append_table_compaction_drops_deleted_rows_and_their_vectors(tmp_path):
    """Append files with vectors are rewritten with the vectors applied: deleted rows stay
    deleted, the rewritten file's vector leaves the index, and the rows read the same."""
    t, first = _append_table_with_vector(tmp_path, small_files=6)
    want = [1, 3] + list(range(5, 11))
    assert [r["id"] for r in read(t, "id")] == want
    assert vectors(t) == {first: [1, 3]}
    report = t.compact(full=True)
    assert report.files_before == 7 and report.rows_after == len(want)
    assert [r["id"] for r in read(t, "id")] == want
    assert vectors(t) == {} and dv_entries(t) == []
    assert first not in live_files(t)


def test_append_file_over_the_delete_ratio_is_rewritten_alone(tmp_path):
    """A file whose vector covers more than compaction.delete-ratio-threshold (2 of 4 rows)
    is rewritten by the next compaction even when the strategy picks nothing else."""
    t, first = _append_table_with_vector(tmp_path, small_files=1)
    others = set(live_files(t)) - {first}
    report = t.compact()
    assert report.files_before == 1 and report.rows_after == 2
    assert others <= set(live_files(t)) and first not in live_files(t)
    assert [r["id"] for r in read(t, "id")] == [1, 3, 5]
    assert vectors(t) == {}


def test_bitmap64_vectors_round_trip_through_a_table(tmp_path):
    t = make_table(str(tmp_path), SCHEMA, ["id"],
                   options={**DV, "deletion-vectors.bitmap64": "true"})
    write(t, rows(list(range(20)), ["a"] * 20))
    t.compact()
    write(t, rows([4], ["b"]))
    t.compact()
    (entry,) = dv_entries(t)
    (r,) = entry.index_file.dv_ranges.values()
    path = t.paths.index_file_path(entry.index_file.file_name)
    data = t.file_io.read_bytes(path)
    assert int.from_bytes(data[r.offset + 4:r.offset + 8], "little") == 1681511377
    assert values(t) == [(i, "b" if i == 4 else "a") for i in range(20)]


def test_two_compactions_from_one_snapshot_the_second_conflicts(tmp_path):
    from lakecore.compact.job import commit_compaction, plan_compaction, run_task
    from lakecore.errors import CommitConflictError

    t = make_table(str(tmp_path), SCHEMA, ["id"], options=DV)
    write(t, rows(list(range(20)), ["a"] * 20))
    t.compact()
    write(t, rows([4], ["b"]))
    plan = plan_compaction(t)
    first = [m for task in plan.tasks for m in run_task(t, task, False)]
    second = [m for task in plan.tasks for m in run_task(t, task, False)]
    assert first[0].compact_new_index_files and second[0].compact_new_index_files
    commit_compaction(t, first, base_snapshot_id=plan.snapshot_id)
    want = values(t)
    with pytest.raises(CommitConflictError):
        commit_compaction(t, second, base_snapshot_id=plan.snapshot_id)
    assert values(t) == want == [(i, "b" if i == 4 else "a") for i in range(20)]
    assert len(dv_entries(t)) == 1


def test_lookup_changelog_with_vectors_sees_rows_deleted_through_vectors(tmp_path):
    t = make_table(str(tmp_path), SCHEMA, ["id"], options={
        **DV, "changelog-producer": "lookup"})
    write(t, rows(list(range(20)), ["a"] * 20))
    t.compact()
    write(t, rows([3], [None], "-D"))
    t.compact()  # 3 is gone only through the vector of the first file
    s1 = t.snapshot_manager.latest_id()
    write(t, rows([3, 4], ["b", "b"]))
    t.compact()
    s2 = t.snapshot_manager.latest_id()
    inc = t.copy({"incremental-between": f"{s1},{s2}"})
    rb = inc.new_read_builder()
    got = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    log = sorted(zip(got["id"].to_pylist(), got["_ROW_KIND"].to_pylist(), got["v"].to_pylist()))
    assert log == [(3, "+I", "b"), (4, "+U", "b"), (4, "-U", "a")]


def test_index_file_in_data_file_dir(tmp_path):
    t = make_table(str(tmp_path), SCHEMA, ["id"],
                   options={**DV, "index-file-in-data-file-dir": "true"})
    write(t, rows(list(range(20)), ["a"] * 20))
    t.compact()
    write(t, rows([4], ["b"]))
    t.compact()
    (entry,) = dv_entries(t)
    name = entry.index_file.file_name
    assert t.file_io.exists(f"{t.paths.bucket_path((), 0)}/{name}")
    assert not t.file_io.exists(t.paths.index_file_path(name))
    assert values(t) == [(i, "b" if i == 4 else "a") for i in range(20)]


def test_damaged_index_file_is_a_corrupt_file_error_naming_it(tmp_path):
    from lakecore.errors import CorruptFileError

    t = make_table(str(tmp_path), SCHEMA, ["id"], options=DV)
    write(t, rows(list(range(20)), ["a"] * 20))
    t.compact()
    write(t, rows([4], ["b"]))
    t.compact()
    (entry,) = dv_entries(t)
    path = t.paths.index_file_path(entry.index_file.file_name)
    data = bytearray(t.file_io.read_bytes(path))
    data[-6] ^= 0xFF  # inside the bitmap: the CRC no longer matches
    t.file_io.write_bytes(path, bytes(data))
    with pytest.raises(CorruptFileError, match="CRC") as e:
        read(t)
    assert e.value.path == path
    with pytest.raises(CorruptFileError):
        t.compact(full=True)


@pytest.mark.parametrize("threshold,rewritten", [("0.2", True), ("0.5", False)])
def test_delete_ratio_threshold_rewrites_mostly_deleted_files(tmp_path, threshold, rewritten):
    t = make_table(str(tmp_path), SCHEMA, ["id"], options={
        **DV, "compaction.delete-ratio-threshold": threshold})
    write(t, rows(list(range(10)), ["a"] * 10))
    t.compact()
    (base,) = live_files(t)
    write(t, rows([1, 2, 3], ["b"] * 3))  # 3 of the file's 10 rows superseded
    t.compact()
    assert values(t) == [(i, "b" if i in (1, 2, 3) else "a") for i in range(10)]
    assert (base in live_files(t)) is not rewritten
    assert vectors(t) == ({} if rewritten else {base: [1, 2, 3]})


def test_writer_compaction_leaves_delete_heavy_files_to_the_dedicated_compaction(tmp_path):
    """A writer's own compaction (write-only = false) marks superseded rows but does not
    rewrite a file over compaction.delete-ratio-threshold (Paimon's primary-key writers do
    not); the dedicated compaction does, and the rows read the same before and after."""
    t = make_table(str(tmp_path), SCHEMA, ["id"], options={**DV, "write-only": "false"})
    write(t, rows(list(range(10)), ["a"] * 10))
    (base,) = live_files(t)
    write(t, rows([1, 2, 3], ["b"] * 3))  # 3 of 10 superseded: over the 0.2 default
    expected = [(i, "b" if i in (1, 2, 3) else "a") for i in range(10)]
    assert values(t) == expected
    assert base in live_files(t) and vectors(t)[base] == [1, 2, 3]
    t.compact()
    assert values(t) == expected
    assert base not in live_files(t) and base not in vectors(t)
