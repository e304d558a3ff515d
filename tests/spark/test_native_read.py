"""``read_table`` / the SQL views read files that need no merge with Spark's own Parquet reader
(``lakecore.spark.native_plan``): which path each file takes, and rows equal to lakecore's own
read (``new_read_builder().to_arrow``) and to independently built expectations."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

from lakecore import CatalogFactory
from lakecore.schema.schema_change import SchemaChange
from lakecore.spark import read_table, register, register_tables
from lakecore.spark.read import plan_read
from tests.core.helpers import make_table, read, write
from tests.spark import helpers as h

DV = {"deletion-vectors.enabled": "true"}


def _rows(df, keys=h.KEY):
    return sorted((r.asDict(recursive=True) for r in df.collect()),
                  key=lambda r: tuple(r[k] for k in keys))


def _live_files(table, snapshot_id=None):
    """(partition, bucket) -> the live files' (name, level), from lakecore's own scan."""
    if snapshot_id is not None:
        table = table.copy({"scan.snapshot-id": str(snapshot_id)})
    out = {}
    for s in table.new_read_builder().new_scan().plan().splits():
        out[(tuple(s.partition), s.bucket)] = {(f.file_name, f.level) for f in s.files}
    return out


def _native_names(plan):
    return {f.file_name for f in plan.native_files}


def _merge_names(plan):
    return {f.file_name for s in plan.merge_splits for f in s.files}


def _source_schema(spark, warehouse, name, **options):
    register(spark)
    return (spark.read.format("lakecore").option("warehouse", warehouse).options(**options)
            .load(name).schema)


def _filled_pk(warehouse, name="db.t", versions=3, rows=150, **options):
    table = h.create(warehouse, name, **options)
    data = h.batches(versions, rows=rows)
    for i, b in enumerate(data, start=1):
        h.library_commit(table, b, i, "lib")
    return table, data


@pytest.mark.slow  # the module's first Spark job: JVM warm-up
def test_fully_compacted_pk_table_is_read_natively(spark, warehouse):
    table, data = _filled_pk(warehouse)
    table.compact(full=True)
    planned = plan_read(warehouse, "db.t")
    files = {n for fs in _live_files(table).values() for n, _ in fs}
    assert planned.plan.merge_splits == () and _native_names(planned.plan) == files
    df = read_table(spark, warehouse, "db.t")
    assert df.schema == _source_schema(spark, warehouse, "db.t")
    assert [f.nullable for f in df.schema.fields] == [False, False, True, True, True, True]
    assert _rows(df) == read(table, sort_by=h.KEY) == h.model(data)


@pytest.mark.slow  # the first Python workers of the module
def test_half_compacted_table_merges_only_the_buckets_that_need_it(spark, warehouse):
    table, data = _filled_pk(warehouse)
    table.compact(full=True)
    model = h.model(data)
    # a later commit touching one partition: its buckets get level-0 files
    touched = [r for r in model if r["dt"] == h.DTS[0]][:12]
    late = h.batch([(r["dt"], r["id"], "-D" if i % 3 == 0 else "+U")
                    for i, r in enumerate(touched)], 9)
    h.library_commit(table, late, 9, "lib")
    data = [*data, late]
    live = _live_files(table)
    merging = {pb for pb, fs in live.items() if any(level == 0 for _, level in fs)}
    clean = set(live) - merging
    assert merging and clean and {p for p, _ in merging} == {(h.DTS[0],)}
    plan = plan_read(warehouse, "db.t").plan
    # every file of a bucket without level-0 files is read natively; every level-0 file merges
    assert {n for pb in clean for n, _ in live[pb]} <= _native_names(plan)
    assert {n for pb in merging for n, lv in live[pb] if lv == 0} <= _merge_names(plan)
    assert {(tuple(s.partition), s.bucket) for s in plan.merge_splits} == merging
    assert _native_names(plan).isdisjoint(_merge_names(plan))
    df = read_table(spark, warehouse, "db.t")
    assert df.schema == _source_schema(spark, warehouse, "db.t")
    assert _rows(df) == read(table, sort_by=h.KEY) == h.model(data)
    # the same rows without the native path
    assert _rows(read_table(spark, warehouse, "db.t", native=False)) == h.model(data)


def _changes(base, version, n=40):
    keys = list(zip(base["dt"].to_pylist(), base["id"].to_pylist(), strict=True))
    picks = keys[version::max(1, len(keys) // n)][:n]
    return h.batch([(d, i, "-D" if j % 4 == 0 else "+U") for j, (d, i) in enumerate(picks)],
                   version)


def test_deletion_vector_table_applies_vectors_natively(spark, warehouse):
    table = h.create(warehouse, "db.dv", **DV)
    base = h.batches(1, rows=600)[0]
    data = [base, _changes(base, 1), _changes(base, 2)]
    for i, b in enumerate(data, start=1):
        h.library_commit(table, b, i, "lib")
        table.compact()
    plan = plan_read(warehouse, "db.dv").plan
    with_vectors = [f for f in plan.native_files if f.deletion_file is not None]
    assert plan.merge_splits == () and with_vectors
    assert sum(f.deletion_file.cardinality for f in with_vectors) > 0
    df = read_table(spark, warehouse, "db.dv")
    assert df.schema == _source_schema(spark, warehouse, "db.dv")
    assert _rows(df) == read(table, sort_by=h.KEY) == h.model(data)


def _dv_table(warehouse, name="db.dv"):
    table = h.create(warehouse, name, **DV)
    base = h.batches(1, rows=600)[0]
    data = [base, _changes(base, 1), _changes(base, 2)]
    for i, b in enumerate(data, start=1):
        h.library_commit(table, b, i, "lib")
        table.compact()
    return table, data


def test_deletion_vectors_are_a_filter_in_the_scan_and_the_anti_join_agrees(
        spark, warehouse, monkeypatch):
    from lakecore.spark import deletion_filter, native_read

    table, data = _dv_table(warehouse)
    plan = plan_read(warehouse, "db.dv").plan
    assert any(f.deletion_file is None for f in plan.native_files)  # clean files kept whole
    assert any(f.deletion_file is not None for f in plan.native_files)
    df = read_table(spark, warehouse, "db.dv")
    executed = df._jdf.queryExecution().executedPlan().toString()
    # the dense bitmap: a search of the file's size and the words, no join
    assert "Join" not in executed and "binarySearch" in executed and "contains" not in executed
    assert "UnsafeArrayData" in executed and len(executed) < 20_000  # named, not printed
    assert _rows(df) == h.model(data)
    # evaluated without generated code too (Spark falls back to it for very wide rows)
    interpreted = {"spark.sql.codegen.wholeStage": "false",
                   "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
    with h.session_conf(spark, **interpreted):
        assert _rows(read_table(spark, warehouse, "db.dv")) == h.model(data)
    # the sparse bitmap, where the dense one would be too large
    monkeypatch.setattr(deletion_filter, "DENSE_MAX_ROWS", 0)
    sparse = read_table(spark, warehouse, "db.dv")
    executed = sparse._jdf.queryExecution().executedPlan().toString()
    assert "Join" not in executed and "contains" in executed  # the bitmap filter, no join
    assert "Broadcast(" in executed and len(executed) < 20_000  # a handle, not the positions
    assert _rows(sparse) == h.model(data)
    monkeypatch.setattr(native_read, "keep_filter", lambda *a: None)  # as when not usable
    joined = read_table(spark, warehouse, "db.dv")
    assert "Join" in joined._jdf.queryExecution().executedPlan().toString()
    assert _rows(joined) == h.model(data)


def test_a_file_whose_size_differs_from_its_manifest_fails_the_read(
        spark, warehouse, monkeypatch):
    """Were a vector keyed by a size Spark never sees, its rows would come back: the read
    fails instead, naming the file."""
    import dataclasses

    from lakecore.errors import CorruptFileError
    from lakecore.spark import native_read

    _dv_table(warehouse)
    real = native_read.keep_filter
    wrong = []

    def wrong_sizes(spark_, scan, files, positions):
        changed = [dataclasses.replace(f, file_size=f.file_size + 1)
                   if f.deletion_file is not None else f for f in files]
        wrong.extend(f.path for f in changed if f.deletion_file is not None)
        return real(spark_, scan, changed, positions)

    monkeypatch.setattr(native_read, "keep_filter", wrong_sizes)
    with pytest.raises(CorruptFileError, match="differs from its manifest entry") as failed:
        read_table(spark, warehouse, "db.dv").collect()
    assert failed.value.path in wrong


def test_the_dense_bitmap_marks_each_files_deleted_rows_from_its_offset():
    import numpy as np

    from lakecore.read.raw_convertible import RawFile
    from lakecore.spark.deletion_filter import dense_rows, dense_words

    def raw(name, size, rows):
        return RawFile(f"/w/{name}", name, "parquet", 0, rows, size, (), 0, None)  # type: ignore[arg-type]

    files = [raw("a", 300, 70), raw("b", 100, 10), raw("c", 200, 1000)]
    # b: the last row and one past the file (names no row); c: no deleted rows
    positions = {"a": np.array([0, 63, 64, 69]), "b": np.array([9, 10]),
                 "c": np.array([], dtype=np.int64)}
    assert dense_rows(files, positions) == 80  # c's rows need no bits
    sizes, offsets, words = dense_words(files, positions)
    assert sizes.tolist() == [100, 300]  # sorted, for the search
    assert offsets.tolist() == [0, 10]  # b's rows first, then a's
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")
    assert len(bits) == 128 and np.flatnonzero(bits).tolist() == [9, 10, 73, 74, 79]


def test_the_filter_is_refused_where_a_size_cannot_name_one_file():
    import numpy as np

    from lakecore.read.raw_convertible import RawFile
    from lakecore.spark.deletion_filter import usable

    def raw(name, size):
        return RawFile(f"/w/{name}", name, "parquet", 0, 10, size, (), 0, None)  # type: ignore[arg-type]

    deleted = {"a": np.array([1, 2]), "b": np.array([], dtype=np.int64)}
    assert usable([raw("a", 100), raw("b", 200)], deleted)
    assert not usable([raw("a", 100), raw("b", 100)], deleted)  # a's size is b's too
    assert usable([raw("a", 100), raw("b", 200), raw("c", 200)], deleted)  # b, c: no deletes
    assert not usable([raw("a", 2**31), raw("b", 200)], deleted)  # beyond an int
    assert not usable([raw("a", 100)], {"a": np.array([2**31])})


APPEND = pa.schema([pa.field("id", pa.int64(), False), ("a", pa.int32()), ("s", pa.string()),
                    ("day", pa.date32())])


def _append_rows(lo, hi, version):
    ids = list(range(lo, hi))
    return pa.table({"id": ids, "a": [i * 7 % 1000 + version for i in ids],
                     "s": [None if i % 11 == 0 else f"s{i}" for i in ids],
                     "day": [dt.date(2026, 11, 1 + i % 3) for i in ids]}, schema=APPEND)


def test_append_table_is_read_natively(spark, warehouse):
    table = make_table(warehouse, APPEND, options={"bucket": "-1"}, name="db.log")
    batches = [_append_rows(0, 400, 0), _append_rows(400, 700, 1), _append_rows(700, 720, 2)]
    for b in batches:
        write(table, b)
    plan = plan_read(warehouse, "db.log").plan
    assert plan.merge_splits == () and len(plan.native_files) >= 3
    df = read_table(spark, warehouse, "db.log")
    assert df.schema == _source_schema(spark, warehouse, "db.log")
    want = sorted(pa.concat_tables(batches).to_pylist(), key=lambda r: r["id"])
    assert _rows(df, ["id"]) == read(table, sort_by="id") == want
    # lakecore's (pyarrow's) set semantics on the native files: a null is "not in" a set
    # without a null, and "in" a set with one
    for pred, keep in ((lambda pb: pb.is_not_in("s", ["s1", "s2"]),
                        lambda s: s not in ("s1", "s2")),
                       (lambda pb: pb.is_in("s", ["s3", None]), lambda s: s in ("s3", None))):
        plan = plan_read(warehouse, "db.log", filter=pred).plan
        assert plan.groups and not plan.merge_splits
        got = _rows(read_table(spark, warehouse, "db.log", filter=pred), ["id"])
        assert got == read(table, sort_by="id", predicate=pred)
        assert got == [r for r in want if keep(r["s"])] and any(r["s"] is None for r in got)


def test_a_warehouse_whose_path_looks_like_a_glob_is_read_natively(spark, tmp_path):
    """The scan's paths are names: Spark would take "[1]" or "{a,b}" in them as a pattern
    and find no file."""
    warehouse = str(tmp_path / "lake[1]{a,b}")
    table = make_table(warehouse, APPEND, options={"bucket": "-1"}, name="db.log")
    batch = _append_rows(0, 50, 0)
    write(table, batch)
    assert plan_read(warehouse, "db.log").plan.native_files
    got = _rows(read_table(spark, warehouse, "db.log"), ["id"])
    assert got == sorted(batch.to_pylist(), key=lambda r: r["id"])


def test_many_files_are_read_without_a_listing_job(spark, warehouse):
    """More than 32 local files: Spark would start a job to look them up; the scan is made
    with the lookup on the driver, and the session's setting is as it was afterwards."""
    key = "spark.sql.sources.parallelPartitionDiscovery.threshold"
    table = make_table(warehouse, APPEND, options={"bucket": "-1"}, name="db.many")
    batches = [_append_rows(3 * i, 3 * i + 3, i) for i in range(36)]
    for b in batches:
        write(table, b)
    plan = plan_read(warehouse, "db.many").plan
    assert len(plan.native_files) == 36 and not plan.merge_splits
    before = spark.conf.get(key)
    jobs = spark.sparkContext.statusTracker().getJobIdsForGroup()
    df = read_table(spark, warehouse, "db.many")
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == jobs  # no job yet
    assert spark.conf.get(key) == before
    want = sorted(pa.concat_tables(batches).to_pylist(), key=lambda r: r["id"])
    assert _rows(df, ["id"]) == read(table, sort_by="id") == want


def test_evolved_schema_maps_each_file_by_field_id(spark, warehouse):
    table = make_table(warehouse, APPEND, options={"bucket": "-1"}, name="db.evo")
    write(table, _append_rows(0, 300, 0))
    catalog = CatalogFactory.create({"warehouse": warehouse})
    catalog.alter_table("db.evo", [SchemaChange.rename_column("s", "label"),
                                   SchemaChange.add_column("note", "STRING"),
                                   SchemaChange.update_column_type("a", "BIGINT")])
    table = catalog.get_table("db.evo")
    new = pa.table({"id": [1000, 1001], "a": [5_000_000_000, None], "label": ["x", None],
                    "day": [dt.date(2026, 12, 1)] * 2, "note": ["n1", None]},
                   schema=pa.schema([pa.field("id", pa.int64(), False), ("a", pa.int64()),
                                     ("label", pa.string()), ("day", pa.date32()),
                                     ("note", pa.string())]))
    write(table, new)
    plan = plan_read(warehouse, "db.evo").plan
    assert plan.merge_splits == () and {g.schema_id for g in plan.groups} == {0, 1}
    old = plan.groups[0]
    assert [(c.name, c.file_name, c.cast) for c in old.columns] == [
        ("id", "id", False), ("a", "a", True), ("label", "s", False), ("day", "day", False),
        ("note", None, False)]
    df = read_table(spark, warehouse, "db.evo")
    assert df.schema == _source_schema(spark, warehouse, "db.evo")
    want = [{"id": r["id"], "a": r["a"], "label": r["s"], "day": r["day"], "note": None}
            for r in _append_rows(0, 300, 0).to_pylist()] + new.to_pylist()
    assert _rows(df, ["id"]) == read(table, sort_by="id") == want
    # a change Spark cannot cast as lakecore does: the old files go the Python way
    catalog.alter_table("db.evo", [SchemaChange.update_column_type("a", "STRING")])
    plan = plan_read(warehouse, "db.evo").plan
    assert not plan.groups and len(plan.merge_splits) >= 1
    table = catalog.get_table("db.evo")
    got = _rows(read_table(spark, warehouse, "db.evo"), ["id"])
    assert got == read(table, sort_by="id")
    assert [r["a"] for r in got] == [None if r["a"] is None else str(r["a"]) for r in want]


def test_time_travel_and_tags_read_files_no_longer_latest(spark, warehouse):
    table, data = _filled_pk(warehouse, versions=2)
    table.compact(full=True)
    old = table.snapshot_manager.latest_id()
    table.create_tag("before", old)
    more = h.batches(4, rows=150)[2:]
    for i, b in enumerate(more, start=3):
        h.library_commit(table, b, i, "lib")
    table.compact(full=True)
    then, now = _live_files(table, old), _live_files(table)
    then_names = {n for fs in then.values() for n, _ in fs}
    assert then_names - {n for fs in now.values() for n, _ in fs}  # rewritten since
    for kwargs in ({"snapshot_id": old}, {"options": {"scan.tag-name": "before"}}):
        planned = plan_read(warehouse, "db.t", **kwargs)
        assert planned.plan.merge_splits == () and _native_names(planned.plan) == then_names
        got = _rows(read_table(spark, warehouse, "db.t", **kwargs))
        assert got == read(table.copy({"scan.snapshot-id": str(old)}), sort_by=h.KEY)
        assert got == h.model(data)
    with pytest.raises(Exception, match="incremental"):
        plan_read(warehouse, "db.t", options={"incremental-between": "1,2"})


def test_partition_filter_and_projection(spark, warehouse):
    table, data = _filled_pk(warehouse)
    table.compact(full=True)
    h.library_commit(table, h.batch([(h.DTS[1], 5, "+U"), (h.DTS[1], 6, "-D")], 7), 7, "lib")
    day = h.DTS[1]

    def pred(pb):
        return pb.and_predicates([pb.equal("dt", day), pb.greater_than("id", 20),
                                  pb.is_not_in("v", ["v30-0", "v31-1"])])

    plan = plan_read(warehouse, "db.t", filter=pred, projection=["id", "v"]).plan
    assert plan.groups and {s.partition for s in plan.merge_splits} <= {(day,)}
    assert all(f.partition == (day,) for f in plan.native_files)
    df = read_table(spark, warehouse, "db.t", filter=pred, projection=["id", "v"])
    assert df.columns == ["id", "v"]
    want = read(table, sort_by="id", predicate=pred, projection=["id", "v"])
    assert _rows(df, ["id"]) == want and want
    assert all(r["id"] > 20 and r["v"] not in ("v30-0", "v31-1") for r in want)
    # a filter Spark would apply with other semantics (floating point): the Python way
    floats = plan_read(warehouse, "db.t", filter=lambda pb: pb.greater_than("amount", 50.0))
    assert not floats.plan.groups and floats.plan.merge_splits
    got = _rows(read_table(spark, warehouse, "db.t",
                           filter=lambda pb: pb.greater_than("amount", 50.0)))
    assert got == read(table, sort_by=h.KEY, predicate=lambda pb: pb.greater_than("amount", 50.0))


def test_sql_views_read_natively(spark, warehouse):
    table, data = _filled_pk(warehouse)
    table.compact(full=True)
    assert register_tables(spark, warehouse) == ["db.t"]
    got = spark.sql(f"SELECT * FROM `db.t` WHERE dt = '{h.DTS[2]}'")
    assert _rows(got) == [r for r in h.model(data) if r["dt"] == h.DTS[2]]
    plan = spark.sql("SELECT * FROM `db.t`")._jdf.queryExecution().executedPlan().toString()
    assert "FileScan parquet" in plan
    # a native view holds the snapshot of its registration (as a view of spark.read.parquet
    # holds its files); registering again shows later commits; data source views replan
    late = h.batch([(h.DTS[2], 10_000, "+I")], 5)
    h.library_commit(table, late, 5, "lib")
    count = f"SELECT count(*) FROM `db.t` WHERE dt = '{h.DTS[2]}'"
    before = sum(1 for r in h.model(data) if r["dt"] == h.DTS[2])
    assert spark.sql(count).collect()[0][0] == before
    register_tables(spark, warehouse)
    assert spark.sql(count).collect()[0][0] == before + 1
    h.library_commit(table, h.batch([(h.DTS[2], 10_001, "+I")], 6), 6, "lib")
    register_tables(spark, warehouse, native=False)
    assert spark.sql(count).collect()[0][0] == before + 2
    h.library_commit(table, h.batch([(h.DTS[2], 10_002, "+I")], 7), 7, "lib")
    assert spark.sql(count).collect()[0][0] == before + 3


TYPES = pa.schema([
    pa.field("k", pa.int32(), False), ("b", pa.bool_()), ("i8", pa.int8()),
    ("f", pa.float32()), ("d", pa.decimal128(12, 3)), ("s", pa.string()),
    ("bin", pa.binary()), ("day", pa.date32()), ("ts", pa.timestamp("us")),
    ("ms", pa.timestamp("ms")), ("ltz", pa.timestamp("us", tz="UTC")),
    ("xs", pa.list_(pa.int64())), ("kv", pa.map_(pa.string(), pa.int32())),
    ("st", pa.struct([("x", pa.int32()), ("y", pa.string())])),
])


def _typed_rows(n):
    out = []
    for k in range(n):
        if k % 4 == 3:
            out.append({"k": k, **{c: None for c in TYPES.names if c != "k"}})
            continue
        out.append({"k": k, "b": k % 2 == 0, "i8": k % 100 - 50, "f": k / 4,
                    "d": decimal.Decimal(f"{k}.{k % 1000:03d}"), "s": f"é{k}",
                    "bin": bytes([k % 256, 1]), "day": dt.date(2026, 1, 1 + k % 28),
                    "ts": dt.datetime(2026, 11, 1, 10, 0, 0, k),
                    "ms": dt.datetime(2026, 11, 1, 10, 0, 0, 1000 * (k % 1000)),
                    "ltz": dt.datetime(2026, 11, 1, 10, 0, k % 60, tzinfo=dt.UTC),
                    "xs": [k, None, -k], "kv": {"a": k, "b": None}, "st": {"x": k, "y": None}})
    return out


def _comparable(values):
    """A column's values; a map's entries in key order."""
    return [sorted(v) if isinstance(v, list) and v and isinstance(v[0], tuple) else v
            for v in values]


def _assert_same_values(df, table, schema):
    """``df`` (Spark's read) holds lakecore's rows of ``table``, column by column (timestamps
    compared in microseconds, Spark's unit); Spark's rows sorted by ``k``, returned."""
    got = df.toArrow().sort_by("k")
    want = pa.Table.from_pylist(read(table, sort_by="k"), schema=schema)
    assert got.column_names == want.column_names
    for name in want.column_names:
        g, w = got.column(name), want.column(name)
        if pa.types.is_timestamp(w.type):
            g = g.cast(pa.timestamp("us", tz=w.type.tz))
            w = w.cast(pa.timestamp("us", tz=w.type.tz))
        assert _comparable(g.to_pylist()) == _comparable(w.to_pylist()), name
    return got


def test_types_read_natively_as_lakecore_reads_them(spark, warehouse):
    table = make_table(warehouse, TYPES, primary_keys=["k"], options={"bucket": "2"},
                       name="db.types")
    rows = _typed_rows(40)
    write(table, pa.Table.from_pylist(rows, schema=TYPES))
    table.compact(full=True)
    planned = plan_read(warehouse, "db.types")
    assert planned.plan.merge_splits == () and planned.plan.groups
    df = read_table(spark, warehouse, "db.types")
    assert df.schema == _source_schema(spark, warehouse, "db.types")
    got = _assert_same_values(df, table, TYPES)
    assert [r["k"] for r in got.to_pylist()] == list(range(40))


def test_not_null_columns_of_every_type_and_odd_names_keep_their_schema(spark, warehouse):
    """Every NOT NULL column keeps its nullability through the scan (each type's constant in
    ``coalesce``), and names that need quoting in SQL are read as they are."""
    odd = pa.schema([pa.field("a`b c.d", pa.int64(), False),
                     pa.field("st 2", pa.struct([("it's", pa.int32()), ("y z", pa.string())]),
                              False)])
    schema = pa.schema([f.with_nullable(False) for f in TYPES] + list(odd))
    table = make_table(warehouse, schema, primary_keys=["k"], options={"bucket": "1"},
                       name="db.notnull")
    rows = [{**r, "a`b c.d": -r["k"], "st 2": {"it's": r["k"], "y z": "q'`\\"}}
            for r in _typed_rows(12) if r["b"] is not None]
    write(table, pa.Table.from_pylist(rows, schema=schema))
    table.compact(full=True)
    planned = plan_read(warehouse, "db.notnull")
    assert planned.plan.merge_splits == () and planned.plan.groups
    df = read_table(spark, warehouse, "db.notnull")
    assert df.schema == _source_schema(spark, warehouse, "db.notnull")
    assert not any(f.nullable for f in df.schema.fields)
    _assert_same_values(df, table, schema)


def test_a_type_spark_cannot_read_exactly_goes_the_python_way(spark, warehouse):
    schema = pa.schema([pa.field("k", pa.int64(), False), ("ns", pa.timestamp("ns"))])
    table = make_table(warehouse, schema, primary_keys=["k"], options={"bucket": "1"},
                       name="db.nanos")
    write(table, pa.table({"k": [1, 2], "ns": pa.array([1_790_000_000_123_456_789, None],
                                                       pa.timestamp("ns"))}, schema=schema))
    table.compact(full=True)
    plan = plan_read(warehouse, "db.nanos").plan
    assert not plan.groups and len(plan.merge_splits) == 1
    got = _rows(read_table(spark, warehouse, "db.nanos"), ["k"])
    assert [r["k"] for r in got] == [1, 2] and got[1]["ns"] is None
    # Spark has microseconds: the nanoseconds are truncated, as the data source does
    assert got[0]["ns"] == dt.datetime(1970, 1, 1) + dt.timedelta(
        microseconds=1_790_000_000_123_456)


RANDOM = pa.schema([pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False),
                    ("v", pa.string()), ("amount", pa.int64())])
ENGINES = [
    {},
    {"deletion-vectors.enabled": "true"},
    {"merge-engine": "partial-update"},
    {"merge-engine": "aggregation", "fields.amount.aggregate-function": "sum"},
    {"merge-engine": "first-row"},
    {"bucket": "-1"},
    {"bucket": "1", "changelog-producer": "lookup"},
]


def _upserts(rng, version, n=120, keys=200, parts=(0, 1, 2)):
    """``n`` upserts of keys in the partitions ``parts`` (a key's partition: its id mod 3)."""
    pool = [i for i in range(keys) if i % 3 in parts]
    ids = rng.choice(pool, size=min(n, len(pool)), replace=False)
    return pa.table({"dt": [h.DTS[int(i) % 3] for i in ids], "id": ids.astype("int64"),
                     "v": [None if (int(i) + version) % 5 == 0 else f"v{i}-{version}"
                           for i in ids],
                     "amount": [int(i) * 10 + version for i in ids]}, schema=RANDOM)


@pytest.mark.parametrize("options", ENGINES, ids=lambda o: ",".join(
    f"{k}={v}" for k, v in o.items()) or "deduplicate")
def test_random_tables_equal_lakecores_read(spark, warehouse, options):
    """Every merge engine, bucket mode, DV on / off, with buckets in every state: fully
    compacted, compacted then written again (level 0 over a sorted run), universal-compacted
    (several levels): the native-plus-merge read returns lakecore's rows."""
    import numpy as np

    rng = np.random.default_rng(len(str(options)))
    table = make_table(warehouse, RANDOM, primary_keys=["dt", "id"], partition_keys=["dt"],
                       options={"bucket": "3", **options}, name="db.r")
    write(table, _upserts(rng, 0))
    write(table, _upserts(rng, 1))
    table.compact(full=True)  # every bucket one sorted run
    write(table, _upserts(rng, 2, n=30, parts=(0, 1)))
    table.compact(partitions=[{"dt": h.DTS[1]}])  # universal: several levels, maybe
    write(table, _upserts(rng, 3, n=20, parts=(0,)))  # level 0 over partition 0's runs
    plan = plan_read(warehouse, "db.r").plan
    native = {f.partition for f in plan.native_files}
    assert (h.DTS[2],) in native  # untouched since the full compaction
    level0_visible = not ({"deletion-vectors.enabled", "changelog-producer"} & set(options)
                          or options.get("merge-engine") == "first-row")
    if level0_visible:  # partition 0's level-0 files merge with the runs below them
        assert (h.DTS[0],) in {s.partition for s in plan.merge_splits}
    names = [f.name for f in _source_schema(spark, warehouse, "db.r").fields]
    df = read_table(spark, warehouse, "db.r")
    assert df.schema == _source_schema(spark, warehouse, "db.r") and df.columns == names
    want = read(table, sort_by=h.KEY)
    assert _rows(df) == want and want
    assert len(want) == len({(r["dt"], r["id"]) for r in want})
