"""Writing, committing and reading primary-key and append tables through the public API."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest

from lakecore.errors import SchemaError
from tests.core.helpers import make_table, read, table_files, write

PK_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("dt", pa.string(), nullable=False),
        pa.field("v", pa.int32()),
        pa.field("s", pa.string()),
    ]
)


def pk_table(tmp_path, **options):
    opts = {"bucket": "2", **{k.replace("_", "-"): str(v) for k, v in options.items()}}
    return make_table(str(tmp_path), PK_SCHEMA, primary_keys=["id", "dt"],
                      partition_keys=["dt"], options=opts)


def rows(ids, dt_, v, s=None):
    n = len(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "dt": [dt_] * n,
                     "v": pa.array(v, pa.int32()), "s": s if s is not None else [None] * n},
                    schema=PK_SCHEMA)


def test_upsert_across_commits_reads_latest_value_per_key(tmp_path):
    t = pk_table(tmp_path)
    write(t, rows([1, 2, 3], "a", [10, 20, 30], ["x", "y", "z"]))
    write(t, rows([2, 3, 4], "a", [21, 31, 41], ["y2", None, "w"]), rows([1], "b", [100]))
    got = read(t, ["dt", "id"])
    assert [(r["dt"], r["id"], r["v"], r["s"]) for r in got] == [
        ("a", 1, 10, "x"), ("a", 2, 21, "y2"), ("a", 3, 31, None), ("a", 4, 41, "w"),
        ("b", 1, 100, None),
    ]


def test_duplicate_keys_within_one_write_keep_the_last(tmp_path):
    t = pk_table(tmp_path)
    write(t, rows([1, 1, 1], "a", [1, 2, 3]))
    assert [r["v"] for r in read(t, "id")] == [3]


def test_rowkind_field_deletes_and_updates(tmp_path):
    schema = PK_SCHEMA.append(pa.field("op", pa.string()))
    t = make_table(str(tmp_path), schema, primary_keys=["id"], options={
        "bucket": "1", "rowkind.field": "op"})
    base = {"id": [1, 2, 3], "dt": ["a"] * 3, "v": [1, 2, 3], "s": [None] * 3, "op": ["+I"] * 3}
    write(t, pa.table(base, schema=schema))
    change = {"id": [1, 2, 2], "dt": ["a"] * 3, "v": [None, 2, 22], "s": [None] * 3,
              "op": ["-D", "-U", "+U"]}
    write(t, pa.table(change, schema=schema))
    got = read(t, "id")
    assert [(r["id"], r["v"], r["op"]) for r in got] == [(2, 22, "+U"), (3, 3, "+I")]


def test_invalid_rowkind_is_rejected_and_table_unchanged(tmp_path):
    schema = PK_SCHEMA.append(pa.field("op", pa.string()))
    t = make_table(str(tmp_path), schema, primary_keys=["id"], options={
        "bucket": "1", "rowkind.field": "op"})
    before = table_files(t)
    bad = pa.table({"id": [1], "dt": ["a"], "v": [1], "s": ["x"], "op": ["DEL"]}, schema=schema)
    with pytest.raises(SchemaError, match="'op'.*DEL"):
        write(t, bad)
    assert table_files(t) == before


def test_sequence_field_orders_records_instead_of_arrival(tmp_path):
    schema = pa.schema([pa.field("id", pa.int64(), False), ("ts", pa.int64()), ("v", pa.string())])
    t = make_table(str(tmp_path), schema, primary_keys=["id"],
                   options={"bucket": "1", "sequence.field": "ts"})
    write(t, pa.table({"id": [1, 2], "ts": [10, 10], "v": ["new", "new"]}, schema=schema))
    # arrives later but carries an older sequence field value for id 1: it must lose
    write(t, pa.table({"id": [1, 2], "ts": [5, 11], "v": ["old", "newer"]}, schema=schema))
    assert [(r["id"], r["v"]) for r in read(t, "id")] == [(1, "new"), (2, "newer")]


def test_partial_update_merges_non_null_columns(tmp_path):
    schema = pa.schema([pa.field("id", pa.int64(), False), ("a", pa.int64()), ("b", pa.string())])
    t = make_table(str(tmp_path), schema, primary_keys=["id"],
                   options={"bucket": "1", "merge-engine": "partial-update"})
    write(t, pa.table({"id": [1, 2], "a": [1, None], "b": [None, "x"]}, schema=schema))
    write(t, pa.table({"id": [1, 2], "a": [None, 5], "b": ["y", None]}, schema=schema))
    assert read(t, "id") == [{"id": 1, "a": 1, "b": "y"}, {"id": 2, "a": 5, "b": "x"}]


def test_aggregation_engine_functions(tmp_path):
    schema = pa.schema([pa.field("id", pa.int64(), False), ("total", pa.int64()),
                        ("lo", pa.int32()), ("hi", pa.float64()), ("tags", pa.string()),
                        ("any_flag", pa.bool_()), ("last", pa.string())])
    t = make_table(str(tmp_path), schema, primary_keys=["id"], options={
        "bucket": "1", "merge-engine": "aggregation",
        "fields.total.aggregate-function": "sum", "fields.lo.aggregate-function": "min",
        "fields.hi.aggregate-function": "max", "fields.tags.aggregate-function": "listagg",
        "fields.any_flag.aggregate-function": "bool_or"})
    write(t, pa.table({"id": [1, 1], "total": [1, 2], "lo": [5, 3], "hi": [1.5, 0.5],
                       "tags": ["a", "b"], "any_flag": [False, False], "last": ["p", None]},
                      schema=schema))
    write(t, pa.table({"id": [1], "total": [10], "lo": [4], "hi": [9.0], "tags": ["c"],
                       "any_flag": [True], "last": ["q"]}, schema=schema))
    assert read(t) == [{"id": 1, "total": 13, "lo": 3, "hi": 9.0, "tags": "a,b,c",
                        "any_flag": True, "last": "q"}]


def test_first_row_engine_keeps_first(tmp_path):
    schema = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])
    t = make_table(str(tmp_path), schema, primary_keys=["id"],
                   options={"bucket": "1", "merge-engine": "first-row"})
    write(t, pa.table({"id": [1, 1], "v": ["first", "second"]}, schema=schema))
    write(t, pa.table({"id": [1, 2], "v": ["third", "only"]}, schema=schema))
    assert read(t, "id") == [{"id": 1, "v": "first"}, {"id": 2, "v": "only"}]


def test_ignore_delete_drops_deletes(tmp_path):
    schema = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string()), ("op", pa.string())])
    t = make_table(str(tmp_path), schema, primary_keys=["id"], options={
        "bucket": "1", "rowkind.field": "op", "ignore-delete": "true"})
    write(t, pa.table({"id": [1], "v": ["a"], "op": ["+I"]}, schema=schema))
    write(t, pa.table({"id": [1], "v": ["a"], "op": ["-D"]}, schema=schema))
    assert read(t) == [{"id": 1, "v": "a", "op": "+I"}]


def test_filters_and_projection(tmp_path):
    t = pk_table(tmp_path)
    write(t, rows(list(range(100)), "a", list(range(100))), rows(list(range(10)), "b", [7] * 10))
    got = read(t, "id", predicate=lambda pb: pb.and_predicates(
        [pb.equal("dt", "a"), pb.greater_or_equal("id", 95)]), projection=["id", "v"])
    assert got == [{"id": i, "v": i} for i in range(95, 100)]
    got = read(t, ["dt", "id"], predicate=lambda pb: pb.equal("v", 7))
    assert [(r["dt"], r["id"]) for r in got] == [("a", 7)] + [("b", i) for i in range(10)]


def test_filter_on_value_column_never_resurrects_old_versions(tmp_path):
    t = pk_table(tmp_path, bucket=1)
    write(t, rows([1], "a", [5]))
    write(t, rows([1], "a", [6]))
    assert read(t, predicate=lambda pb: pb.equal("v", 5)) == []


def test_time_travel_by_snapshot_id_and_timestamp(tmp_path):
    t = pk_table(tmp_path)
    (s1,) = write(t, rows([1, 2], "a", [1, 2]))
    (s2,) = write(t, rows([1], "a", [10]))
    snap1 = t.snapshot_manager.snapshot(s1)
    old = t.copy({"scan.snapshot-id": s1})
    assert [r["v"] for r in read(old, "id")] == [1, 2]
    by_time = t.copy({"scan.timestamp-millis": snap1.time_millis})
    assert [r["v"] for r in read(by_time, "id")] == [1, 2]
    assert [r["v"] for r in read(t, "id")] == [10, 2]
    assert s2 == s1 + 1


def test_incremental_read_between_snapshots(tmp_path):
    t = pk_table(tmp_path, bucket=1)
    (s1,) = write(t, rows([1, 2], "a", [1, 2]))
    write(t, rows([2, 3], "a", [20, 30]))
    (s3,) = write(t, rows([4], "a", [40]))
    inc = t.copy({"incremental-between": f"{s1},{s3}"})
    got = read(inc, "id")
    assert [(r["id"], r["v"]) for r in got] == [(2, 20), (3, 30), (4, 40)]


def test_changelog_producer_input_writes_changelog_and_incremental_reads_it(tmp_path):
    schema = PK_SCHEMA.append(pa.field("op", pa.string()))
    t = make_table(str(tmp_path), schema, primary_keys=["id"], options={
        "bucket": "1", "rowkind.field": "op", "changelog-producer": "input"})
    (s1,) = write(t, pa.table({"id": [1, 2], "dt": ["a"] * 2, "v": [1, 2], "s": [None] * 2,
                               "op": ["+I", "+I"]}, schema=schema))
    (s2,) = write(t, pa.table({"id": [1, 1, 2], "dt": ["a"] * 3, "v": [1, 11, 2],
                               "s": [None] * 3, "op": ["-U", "+U", "-D"]}, schema=schema))
    snap = t.snapshot_manager.snapshot(s2)
    assert snap.changelog_manifest_list and snap.changelog_record_count == 3
    inc = t.copy({"incremental-between": f"{s1},{s2}"})
    rb = inc.new_read_builder()
    got = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    assert sorted(zip(got["id"].to_pylist(), got["v"].to_pylist(),
                      got["_ROW_KIND"].to_pylist())) == [(1, 1, "-U"), (1, 11, "+U"), (2, 2, "-D")]


def test_spill_to_disk_with_small_write_buffer(tmp_path):
    t = pk_table(tmp_path, bucket=1, write_buffer_size="64 kb")
    wb = t.new_batch_write_builder()
    w = wb.new_write()
    rng = np.random.default_rng(7)
    model: dict[int, int] = {}
    for i in range(20):
        ids = rng.integers(0, 3000, 1000)
        vals = np.arange(i * 1000, (i + 1) * 1000)
        w.write_arrow(rows(ids.tolist(), "a", vals.tolist()))
        model.update(zip(ids.tolist(), vals.tolist()))
    writer = next(iter(w._writers.values()))
    assert writer.spill_count > 1, "the small buffer must have spilled sorted runs to disk"
    wb.new_commit().commit(w.prepare_commit())
    got = read(t, "id")
    assert [(r["id"], r["v"]) for r in got] == sorted(model.items())
    # one level-0 file per flush: spilled runs are merged into the same flush
    assert len(t.new_read_builder().new_scan().plan().splits()[0].files) == 1


def test_files_roll_at_target_file_size(tmp_path):
    t = pk_table(tmp_path, bucket=1, target_file_size="64 kb")
    n = 200_000
    write(t, rows(list(range(n)), "a", list(range(n)), [f"s{i}" for i in range(n)]))
    files = t.new_read_builder().new_scan().plan().splits()[0].files
    assert len(files) > 1
    assert sum(f.row_count for f in files) == n
    assert len(read(t)) == n


def test_timestamps_dates_decimals_round_trip(tmp_path):
    schema = pa.schema([pa.field("id", pa.int64(), False), ("ts", pa.timestamp("us")),
                        ("d", pa.date32()), ("m", pa.decimal128(12, 2)), ("b", pa.binary())])
    t = make_table(str(tmp_path), schema, primary_keys=["id"], options={"bucket": "1"})
    import decimal
    data = {"id": [1], "ts": [dt.datetime(2026, 1, 2, 3, 4, 5, 6)], "d": [dt.date(2026, 1, 2)],
            "m": [decimal.Decimal("12.34")], "b": [b"\x00\x01"]}
    write(t, pa.table(data, schema=schema))
    assert read(t) == [{k: v[0] for k, v in data.items()}]


def test_append_only_tables_unaware_and_fixed_bucket(tmp_path):
    schema = pa.schema([("k", pa.int64()), ("v", pa.string())])
    t = make_table(str(tmp_path), schema, options={"bucket": "-1"}, name="db.unaware")
    write(t, pa.table({"k": [1, 1], "v": ["a", "b"]}))
    write(t, pa.table({"k": [1], "v": ["c"]}))
    assert sorted(r["v"] for r in read(t)) == ["a", "b", "c"]
    t2 = make_table(str(tmp_path), schema, options={"bucket": "3", "bucket-key": "k"},
                    name="db.fixed")
    write(t2, pa.table({"k": list(range(30)), "v": ["x"] * 30}))
    splits = t2.new_read_builder().new_scan().plan().splits()
    assert len(splits) == 3 and sum(s.row_count for s in splits) == 30


def test_nested_columns_write_read_and_pypaimon_agrees(tmp_path):
    from tests.compat.pypaimon_runner import paimon_available, paimon_read

    s = pa.schema([pa.field("id", pa.int64(), False), ("tags", pa.list_(pa.string())),
                   ("r", pa.struct([("a", pa.int32()), ("b", pa.string())])), ("v", pa.int64())])
    t = make_table(str(tmp_path), s, primary_keys=["id"], options={"bucket": "1"})
    write(t, pa.table({"id": [1, 2], "tags": [["x"], None], "r": [{"a": 1, "b": "q"}, None],
                       "v": [5, 6]}, schema=s))
    write(t, pa.table({"id": [2], "tags": [["y", "z"]], "r": [{"a": 2, "b": None}], "v": [7]},
                      schema=s))
    want = [{"id": 1, "tags": ["x"], "r": {"a": 1, "b": "q"}, "v": 5},
            {"id": 2, "tags": ["y", "z"], "r": {"a": 2, "b": None}, "v": 7}]
    assert read(t, "id") == want
    files = t.new_read_builder().new_scan().plan().splits()[0].files
    assert files[0].value_stats_cols == ("id", "v")  # stats only for atomic columns
    if paimon_available():
        assert paimon_read(str(tmp_path), "db.t").sort_by("id").to_pylist() == want
